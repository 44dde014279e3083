/* os.h: the operating-system services kwb's Lua side needs (locks, the
 * environment, directories, terminals), as plain C functions */
#ifndef KWB_OS_H
#define KWB_OS_H

/* Open (creating it) and lock the file at path exclusively, waiting for the
 * lock: the descriptor, whose close releases it, or a negative kwb_status. */
int kwb_os_flock(const char *path);
/* The same without waiting when wait is 0: held elsewhere, it fails at once. */
int kwb_os_flock_try(const char *path, int wait);
/* This process's environment, NULL-terminated ("NAME=VALUE"). */
char **kwb_os_environ(void);
/* The working directory into buf: 0, or a negative kwb_status. */
int kwb_os_cwd(char *buf, size_t size);
/* The real user id. */
unsigned kwb_os_uid(void);
/* mkdir -p: 0, or a negative kwb_status naming the directory. */
int kwb_os_mkdirs(const char *path);
/* Whether path can be the cache: for the default (named 0) its directory is
 * made; for a path the user named it must exist, so a typo is an error and
 * not a new empty cache. 0, or -1 with kwb_last_error() saying why. */
int kwb_os_cache_place(const char *path, int named);
/* Whether kwb may write a file the user named (what: "the bundle", ...): one
 * that exists must be a regular file (never a device, FIFO, socket or
 * directory), and its directory must exist (kwb makes none). 0, or a
 * negative kwb_status with kwb_last_error() naming the path and why. */
int kwb_os_output_file(const char *path, const char *what);
/* The same for a directory the user named to write into: one that exists
 * must be a directory; a missing one is made where its parent exists, and
 * is an error naming the parent where not. */
int kwb_os_output_dir(const char *path, const char *what);
/* Is fd a terminal? */
int kwb_os_isatty(int fd);
/* Is path a regular file this process may execute? */
int kwb_os_executable(const char *path);
/* The machine's hardware name (uname -m) into buf: 0, or a negative kwb_status. */
int kwb_os_machine(char *buf, size_t size);

#endif
