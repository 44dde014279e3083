/* proc.h: run a program and capture what it prints */
#ifndef KWB_PROC_H
#define KWB_PROC_H
#include <stddef.h>

/* Run argv[0] (searched on PATH) with its stdout and stderr captured together
 * into *output (NUL-terminated, at most cap bytes kept, free with free()).
 * Returns the exit status (0..255), 128+signal if it was killed, or a negative
 * kwb_status if it could not be started. */
int kwb_proc_run(const char *const *argv, char **output, size_t cap);

/* What kwb_proc_exec runs a program with and gets back from it. */
typedef struct {
    const char *input;   /* a file for its stdin, or NULL for /dev/null */
    double timeout;      /* seconds of wall time before it is killed (its process group), 0: none */
    size_t cap;          /* bytes kept of stdout and of stderr each */
    char *out, *err;     /* what it printed (NUL-terminated; free with free()) */
    int timed_out;       /* 1 when the timeout killed it */
    double seconds;      /* its wall time, from its start to its end */
} kwb_proc_io;

/* Run argv[0] (searched on PATH) in a process group of its own, stdout and
 * stderr captured apart. Returns the exit status (0..255), 128+signal if it
 * was killed, or a negative kwb_status if it could not be started. */
int kwb_proc_exec(const char *const *argv, kwb_proc_io *io);

/* Run n programs at once, each as kwb_proc_exec runs one (argvs[i] with
 * ios[i], a thread each), and wait for all. rcs[i]: what kwb_proc_exec
 * returned for each. Returns 0, or the negative kwb_status of the first that
 * could not be started (its sentence in kwb_last_error()); the others ran. */
int kwb_proc_exec_all(int n, const char *const *const *argvs, kwb_proc_io *ios, int *rcs);

#endif
