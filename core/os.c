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
