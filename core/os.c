/* os.c: the operating-system services kwb's Lua side needs (locks, the
 * environment, directories, terminals), as plain C functions */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "error.h"
#include "kwb.h"
#include "os.h"
#include "util.h"

extern char **environ;

int kwb_os_flock(const char *path) { return kwb_os_flock_try(path, 1); }

int kwb_os_flock_try(const char *path, int wait) {
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return kwb_fail(KWB_EIO, "cannot open the lock %s: %s", path, strerror(errno));
    while (flock(fd, LOCK_EX | (wait ? 0 : LOCK_NB)) != 0) {
        if (errno == EINTR) continue;
        if (errno == EWOULDBLOCK && !wait) {
            close(fd);
            return kwb_fail(KWB_EIO, "%s is held", path);
        }
        int e = kwb_fail(KWB_EIO, "cannot lock %s: %s", path, strerror(errno));
        close(fd);
        return e;
    }
    return fd;
}

char **kwb_os_environ(void) { return environ; }

int kwb_os_cwd(char *buf, size_t size) {
    if (!getcwd(buf, size)) return kwb_fail(KWB_EIO, "cannot read the working directory");
    return 0;
}

unsigned kwb_os_uid(void) { return (unsigned)getuid(); }

int kwb_os_mkdirs(const char *path) {
    if (kwb_mkdirs(path) != 0) return kwb_fail(KWB_EIO, "cannot create %s: %s", path, strerror(errno));
    return 0;
}

int kwb_os_cache_place(const char *path, int named) {
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return kwb_fail(KWB_EINVAL, "it is a directory: name the cache file, e.g. %s/kwb.db", path);
    const char *slash = strrchr(path, '/');
    if (!slash) return 0;   /* in the working directory */
    char dir[4096];
    snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    if (!named) {
        if (kwb_mkdirs(dir) == 0) return 0;
        return kwb_fail(KWB_EIO, "cannot create the cache directory %s: %s", dir, strerror(errno));
    }
    if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode)) return 0;
    return kwb_fail(KWB_EINVAL, "the directory %s does not exist (kwb makes the cache file, not its directory)", dir);
}

/* What a path is, in words, where it is not a regular file. */
static const char *kind_of(mode_t m) {
    if (S_ISDIR(m)) return "a directory";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISSOCK(m)) return "a socket";
    return "not a regular file";
}

/* The directory a path is in, into dir ("." for a bare name), trailing
 * slashes of path ignored. */
static void parent_of(const char *path, char *dir, size_t n) {
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/') len--;
    size_t i = len;
    while (i > 0 && path[i - 1] != '/') i--;
    if (i == 0) { snprintf(dir, n, "."); return; }
    while (i > 1 && path[i - 1] == '/') i--;   /* a//b: a */
    snprintf(dir, n, "%.*s", (int)i, path);
}

/* The directory of path must exist: kwb makes none the user did not name. */
static int parent_exists(const char *path, const char *what, const char *note) {
    char dir[4096];
    struct stat st;
    parent_of(path, dir, sizeof dir);
    if (stat(dir, &st) != 0)
        return kwb_fail(KWB_EINVAL, "cannot write %s %s: the directory %s does not exist (%s)", what, path, dir,
                        note);
    if (!S_ISDIR(st.st_mode))
        return kwb_fail(KWB_EINVAL, "cannot write %s %s: %s is %s, not a directory", what, path, dir,
                        kind_of(st.st_mode));
    return 0;
}

int kwb_os_output_file(const char *path, const char *what) {
    struct stat st;
    if (!path[0]) return kwb_fail(KWB_EINVAL, "cannot write %s: its path is empty", what);
    if (stat(path, &st) == 0) {
        if (S_ISREG(st.st_mode)) return 0;
        return kwb_fail(KWB_EINVAL, "cannot write %s %s: it is %s, not a regular file", what, path,
                        kind_of(st.st_mode));
    }
    if (errno != ENOENT)
        return kwb_fail(KWB_EIO, "cannot write %s %s: %s", what, path, strerror(errno));
    return parent_exists(path, what, "kwb makes no directories for a file");
}

int kwb_os_output_dir(const char *path, const char *what) {
    struct stat st;
    if (!path[0]) return kwb_fail(KWB_EINVAL, "cannot write %s: its path is empty", what);
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode)) return 0;
        return kwb_fail(KWB_EINVAL, "cannot write %s %s: it is %s, not a directory", what, path,
                        S_ISREG(st.st_mode) ? "a regular file" : kind_of(st.st_mode));
    }
    if (errno != ENOENT)
        return kwb_fail(KWB_EIO, "cannot write %s %s: %s", what, path, strerror(errno));
    int rc = parent_exists(path, what, "kwb makes the directory named, not its parents");
    if (rc) return rc;
    if (mkdir(path, 0777) != 0 && errno != EEXIST)
        return kwb_fail(KWB_EIO, "cannot make the directory %s: %s", path, strerror(errno));
    return 0;
}

int kwb_os_isatty(int fd) { return isatty(fd) == 1; }

int kwb_os_executable(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

int kwb_os_machine(char *buf, size_t size) {
    struct utsname u;
    if (uname(&u) != 0) return kwb_fail(KWB_EIO, "uname failed: %s", strerror(errno));
    snprintf(buf, size, "%s", u.machine);
    return 0;
}
