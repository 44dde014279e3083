/* worker.c: worker processes: start one confined, talk to it in frames,
 * capture its output, notice its death, kill it; and the worker's own side of
 * the protocol (fd 3), its device lock (fd 5) and its stray children. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "error.h"
#include "kwb.h"

enum { FD_PROTO = 3, FD_LOCK = 5, FD_EXE = 6 };
#define MAX_FRAME ((size_t)KWB_WORKER_MAX_FRAME)

struct kwb_worker {
    pid_t pid;
    int sock, out;          /* protocol socket, output pipe (read ends) */
    int alive, status, killed, isolated, uid;
    char *scratch;
    int scratch_made;       /* 1 while the scratch directory is there to remove */
    int scratch_fd;         /* the scratch directory, flock()ed while this handle keeps it */
    unsigned char *in;      /* bytes of frames not yet returned */
    size_t in_len, in_cap;
    char *cap;              /* captured output since the last take */
    size_t cap_len, cap_max;
    uint64_t out_total;
};

void kwb_worker_opts_default(kwb_worker_opts *o) {
    *o = (kwb_worker_opts){.scratch_parent = "/tmp", .cpu_s = 3600, .fsize = 1ull << 30,
                           .nproc = 256, .as = 0, .output_cap = 64 << 10,
                           .uid = 65534, .gid = 65534, .isolate = 1, .sandbox_uid = -1};
}

/* ---- small helpers ------------------------------------------------------ */

/* ---- scratch directories ------------------------------------------------ */

/* Empty the directory fd (taken) depth first, each step relative to an open
 * directory and none through a symbolic link (O_NOFOLLOW; a link itself is
 * unlinked), so a tree a worker's processes renamed or linked meanwhile never
 * turns the removal outside it: as root this runs on trees a worker uid owns. */
static void empty_dir(int fd, int depth) {
    DIR *d = fdopendir(fd);
    if (!d) { close(fd); return; }
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        if (unlinkat(dirfd(d), e->d_name, 0) == 0 || errno != EISDIR || depth >= 64) continue;
        int sub = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub < 0) continue;
        empty_dir(sub, depth + 1);
        unlinkat(dirfd(d), e->d_name, AT_REMOVEDIR);
    }
    closedir(d);
}

/* Remove the worker's scratch directory when its handle is freed (a pool
 * frees a dead worker's handle as soon as it notices the death); its lock
 * goes last, with the descriptor. */
static void drop_scratch(kwb_worker *w) {
    if (!w->scratch_made) return;
    int fd = w->scratch_fd >= 0 ? fcntl(w->scratch_fd, F_DUPFD_CLOEXEC, 0)
                                : open(w->scratch, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) empty_dir(fd, 0);
    rmdir(w->scratch);   /* (a link put in its place is not a directory: ENOTDIR) */
    if (w->scratch_fd >= 0) close(w->scratch_fd);
    w->scratch_fd = -1;
    w->scratch_made = 0;
}

/* The working directories of every process this one may look at. */
static char **process_cwds(size_t *n) {
    *n = 0;
    size_t cap = 0;
    char **v = NULL;
    DIR *d = opendir("/proc");
    if (!d) return NULL;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        char p[300], target[4096];
        snprintf(p, sizeof p, "/proc/%s/cwd", e->d_name);
        ssize_t r = readlink(p, target, sizeof target - 1);
        if (r <= 0) continue;
        target[r] = 0;
        if (*n == cap) {
            char **nv = realloc(v, (cap = cap ? cap * 2 : 64) * sizeof *nv);
            if (!nv) break;
            v = nv;
        }
        if (!(v[*n] = strdup(target))) break;
        (*n)++;
    }
    closedir(d);
    return v;
}

/* Is some process's working directory dir or below it? */
static int in_use(char *const *cwds, size_t n, const char *dir) {
    size_t len = strlen(dir);
    for (size_t i = 0; i < n; i++)
        if (strncmp(cwds[i], dir, len) == 0 && (cwds[i][len] == 0 || cwds[i][len] == '/')) return 1;
    return 0;
}

int kwb_worker_sweep(const char *parent, double min_age_s) {
    char real[4096];
    if (!realpath(parent, real)) return kwb_fail(KWB_EIO, "cannot read %s: %s", parent, strerror(errno));
    int pfd = open(real, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (pfd < 0) return kwb_fail(KWB_EIO, "cannot read %s: %s", real, strerror(errno));
    DIR *d = fdopendir(fcntl(pfd, F_DUPFD_CLOEXEC, 0));
    if (!d) { close(pfd); return kwb_fail(KWB_EIO, "cannot read %s: %s", real, strerror(errno)); }
    static const char prefix[] = "kwb-worker-";
    char **cwds = NULL;
    size_t ncwd = 0;
    int looked = 0, removed = 0;
    time_t now = time(NULL);
    struct dirent *e;
    while ((e = readdir(d))) {
        struct stat st, fst;
        if (strncmp(e->d_name, prefix, sizeof prefix - 1) != 0 || strlen(e->d_name) != sizeof prefix - 1 + 6) continue;
        if (fstatat(pfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode)) continue;
        if (geteuid() != 0 && st.st_uid != geteuid()) continue;   /* (not ours to remove) */
        if (difftime(now, st.st_mtime) < min_age_s) continue;     /* one being made now */
        int fd = openat(pfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) continue;
        if (fstat(fd, &fst) != 0 || fst.st_ino != st.st_ino || fst.st_dev != st.st_dev ||
            flock(fd, LOCK_EX | LOCK_NB) != 0) {   /* a live worker's handle holds it */
            close(fd);
            continue;
        }
        if (!looked++) cwds = process_cwds(&ncwd);
        char path[sizeof real + 32];   /* (the name is 17 bytes) */
        snprintf(path, sizeof path, "%s/%.17s", real, e->d_name);
        if (in_use(cwds, ncwd, path)) {   /* a worker of a kwb that does not lock its scratch */
            close(fd);
            continue;
        }
        empty_dir(fcntl(fd, F_DUPFD_CLOEXEC, 0), 0);
        if (unlinkat(pfd, e->d_name, AT_REMOVEDIR) == 0) removed++;
        close(fd);
    }
    closedir(d);
    close(pfd);
    for (size_t i = 0; i < ncwd; i++) free(cwds[i]);
    free(cwds);
    return removed;
}

/* The processes of uid now running (RLIMIT_NPROC counts them all). */
static uint64_t procs_of(uid_t uid) {
    DIR *d = opendir("/proc");
    if (!d) return 0;
    uint64_t n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        char p[300];
        struct stat sb;
        snprintf(p, sizeof p, "/proc/%s", e->d_name);
        if (stat(p, &sb) == 0 && sb.st_uid == uid) n++;
    }
    closedir(d);
    return n;
}

static void say(const char *a, const char *b) {   /* async-signal-safe message to fd 2 */
    static const char pre[] = "kwb worker: ";
    if (write(2, pre, sizeof pre - 1) < 0) return;
    if (write(2, a, strlen(a)) < 0) return;
    if (b && write(2, b, strlen(b)) < 0) return;
    if (write(2, "\n", 1) < 0) return;
}

static void limit(int res, uint64_t v) {
    if (!v) return;
    struct rlimit r = {(rlim_t)v, (rlim_t)v};
    if (setrlimit(res, &r) != 0) say("cannot set a resource limit: ", strerror(errno));
}

/* Private mounts, everything read-only but scratch (and /proc), no network. Returns 1 if
 * the namespaces were made. */
static int isolate(const char *scratch) {
    if (unshare(CLONE_NEWNS | CLONE_NEWNET) != 0) {
        say("no private mount and network namespace: ", strerror(errno));
        return 0;
    }
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) say("mount --make-rprivate /: ", strerror(errno));
    if (mount(scratch, scratch, NULL, MS_BIND, NULL) != 0) say("cannot bind the scratch directory: ", strerror(errno));
    /* /tmp stays as it is, read-only like the rest: a private /tmp bound over
     * it would hide whatever lives there (a checkout in /tmp, say, with the
     * recipe the worker must read). Tools write to TMPDIR, the scratch's tmp. */
    struct mount_attr ro = {.attr_set = MOUNT_ATTR_RDONLY};
    if (mount_setattr(AT_FDCWD, "/", AT_RECURSIVE, &ro, sizeof ro) != 0)
        say("cannot make / read-only: ", strerror(errno));
    struct mount_attr rw = {.attr_clr = MOUNT_ATTR_RDONLY};
    /* procfs stays writable (its own permissions still apply): the CUDA
     * driver's cuInit fails with CUDA_ERROR_OPERATING_SYSTEM on a read-only
     * /proc (seen on the H200 machine). */
    if (mount_setattr(AT_FDCWD, "/proc", 0, &rw, sizeof rw) != 0)
        say("cannot keep /proc writable: ", strerror(errno));
    if (mount_setattr(AT_FDCWD, scratch, 0, &rw, sizeof rw) != 0)
        say("cannot make the scratch directory writable: ", strerror(errno));
    return 1;
}

/* In the child between fork and exec: only async-signal-safe calls. */
static void child(const kwb_worker_opts *o, const char *scratch, int sock, int out, int lock, int exe,
                  int devnull, char *const *argv, char *const *envp, uint64_t nproc, pid_t parent,
                  int namespaces) {
    setsid();
    /* move every descriptor above the ones being assigned, then place them */
    int s = fcntl(sock, F_DUPFD, 20), w = fcntl(out, F_DUPFD, 20), e = fcntl(exe, F_DUPFD, 20);
    int l = lock >= 0 ? fcntl(lock, F_DUPFD, 20) : -1, z = fcntl(devnull, F_DUPFD, 20);
    if (s < 0 || w < 0 || e < 0 || z < 0 || (lock >= 0 && l < 0)) _exit(126);
    if (dup2(z, 0) < 0 || dup2(w, 1) < 0 || dup2(w, 2) < 0 || dup2(s, FD_PROTO) < 0 || dup2(e, FD_EXE) < 0) _exit(126);
    if (l >= 0 && dup2(l, FD_LOCK) < 0) _exit(126);
    if (l < 0) close(FD_LOCK);
    close(4);
    syscall(SYS_close_range, FD_EXE + 1, ~0u, 0);
    fcntl(FD_EXE, F_SETFD, FD_CLOEXEC);

    if (namespaces) isolate(scratch);
    struct rlimit zero = {0, 0};
    setrlimit(RLIMIT_CORE, &zero);
    limit(RLIMIT_CPU, o->cpu_s);
    limit(RLIMIT_FSIZE, o->fsize);
    limit(RLIMIT_AS, o->as);
    if (getuid() == 0 || geteuid() == 0) {
        /* a second uid, its sandboxes', rides in the real uid through exec
         * (which overwrites the saved one): kwb_sandbox_take_uid puts it there */
        uid_t real = o->sandbox_uid >= 0 && o->sandbox_uid != o->uid ? (uid_t)o->sandbox_uid : (uid_t)o->uid;
        if (setgroups(0, NULL) != 0 || setgid((gid_t)o->gid) != 0 || setresuid(real, (uid_t)o->uid, (uid_t)o->uid) != 0) {
            say("cannot drop root: ", strerror(errno));
            _exit(125);
        }
    }
    if (getuid() == 0 || geteuid() == 0 || getgid() == 0) { say("refusing to run as root", NULL); _exit(125); }
    limit(RLIMIT_NPROC, nproc);
    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);   /* strays of its candidates come back to it */
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);   /* after setuid, which clears it */
    if (getppid() != parent) _exit(125);
    if (chdir(scratch) != 0) { say("cannot enter the scratch directory: ", strerror(errno)); _exit(126); }
    syscall(SYS_execveat, FD_EXE, "", argv, envp, AT_EMPTY_PATH);
    say("cannot start: ", strerror(errno));
    _exit(127);
}

static char **strv_copy(const char *const *v) {
    size_t n = 0;
    while (v && v[n]) n++;
    char **c = calloc(n + 1, sizeof *c);
    if (!c) return NULL;
    for (size_t i = 0; i < n; i++)
        if (!(c[i] = strdup(v[i]))) {
            for (size_t j = 0; j < i; j++) free(c[j]);
            free(c);
            return NULL;
        }
    return c;
}

/* "%SCRATCH%" in each string becomes dir; 0 or -1 when out of memory. */
static int put_scratch(char **v, const char *dir) {
    static const char tok[] = "%SCRATCH%";
    for (size_t i = 0; v && v[i]; i++) {
        char *at;
        while ((at = strstr(v[i], tok))) {
            size_t pre = (size_t)(at - v[i]), n = strlen(v[i]) - (sizeof tok - 1) + strlen(dir) + 1;
            char *r = malloc(n);
            if (!r) return -1;
            snprintf(r, n, "%.*s%s%s", (int)pre, v[i], dir, at + sizeof tok - 1);
            free(v[i]);
            v[i] = r;
        }
    }
    return 0;
}

static void strv_free(char **v) {
    for (size_t i = 0; v && v[i]; i++) free(v[i]);
    free(v);
}

/* ---- the parent's side --------------------------------------------------- */

int kwb_worker_start(const kwb_worker_opts *o, kwb_worker **out) {
    *out = NULL;
    if (!o->argv || !o->argv[0]) return kwb_fail(KWB_EINVAL, "a worker needs argv");
    kwb_worker *w = calloc(1, sizeof *w);
    if (!w) return kwb_fail(KWB_ENOMEM, "out of memory");
    w->sock = w->out = w->scratch_fd = -1;
    w->cap_max = o->output_cap;
    const char *parent = o->scratch_parent ? o->scratch_parent : "/tmp";
    size_t plen = strlen(parent) + 32;
    w->scratch = malloc(plen);
    char **argv = strv_copy(o->argv), **envp = strv_copy(o->env);
    if (!w->scratch || !argv || !envp) {
        strv_free(argv); strv_free(envp); kwb_worker_free(w);
        return kwb_fail(KWB_ENOMEM, "out of memory");
    }
    snprintf(w->scratch, plen, "%s/kwb-worker-XXXXXX", parent);
    int rc = KWB_EIO;
    int sv[2] = {-1, -1}, op[2] = {-1, -1}, lock = -1, exe = -1, devnull = -1;
    int root = geteuid() == 0;
    if (!mkdtemp(w->scratch)) {
        kwb_fail(KWB_EIO, "cannot make a scratch directory in %s: %s", parent, strerror(errno));
        free(w->scratch); w->scratch = NULL;
        goto fail;
    }
    w->scratch_made = 1;
    /* held while this handle keeps the directory: a sweep (kwb_worker_sweep) leaves it be */
    if ((w->scratch_fd = open(w->scratch, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
        flock(w->scratch_fd, LOCK_EX | LOCK_NB) != 0) {
        kwb_fail(KWB_EIO, "cannot lock the scratch directory %s: %s", w->scratch, strerror(errno));
        goto fail;
    }
    if (put_scratch(envp, w->scratch) != 0) {
        kwb_fail(KWB_ENOMEM, "out of memory");
        goto fail;
    }
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s/tmp", w->scratch);
    if (mkdir(tmp, 0700) != 0) {
        kwb_fail(KWB_EIO, "cannot make %s: %s", tmp, strerror(errno));
        goto fail;
    }
    if (root && (chown(w->scratch, (uid_t)o->uid, (gid_t)o->gid) != 0 || chown(tmp, (uid_t)o->uid, (gid_t)o->gid) != 0)) {
        kwb_fail(KWB_EIO, "cannot give %s to uid %d: %s", w->scratch, (int)o->uid, strerror(errno));
        goto fail;
    }
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0 || pipe2(op, O_CLOEXEC) != 0) {
        kwb_fail(KWB_EIO, "cannot make the worker's channels: %s", strerror(errno));
        goto fail;
    }
    const char *exe_path = o->exe ? o->exe : "/proc/self/exe";
    if ((exe = open(exe_path, O_RDONLY | O_CLOEXEC)) < 0) {
        kwb_fail(KWB_EIO, "cannot open %s: %s", exe_path, strerror(errno));
        goto fail;
    }
    if ((devnull = open("/dev/null", O_RDWR | O_CLOEXEC)) < 0) {
        kwb_fail(KWB_EIO, "cannot open /dev/null: %s", strerror(errno));
        goto fail;
    }
    if (o->lock_path && (lock = open(o->lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0644)) < 0) {
        kwb_fail(KWB_EIO, "cannot open the device lock %s: %s", o->lock_path, strerror(errno));
        goto fail;
    }
    uint64_t nproc = 0;
    if (o->nproc) nproc = o->nproc + procs_of(root ? (uid_t)o->uid : getuid());
    w->uid = root ? o->uid : (int)getuid();
    w->isolated = root && o->isolate;
    pid_t me = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        kwb_fail(KWB_EIO, "cannot fork a worker: %s", strerror(errno));
        goto fail;
    }
    if (pid == 0)
        child(o, w->scratch, sv[1], op[1], lock, exe, devnull, argv, envp, nproc, me, w->isolated);
    w->pid = pid;
    w->alive = 1;
    w->sock = sv[0];
    w->out = op[0];
    sv[0] = op[0] = -1;
    fcntl(w->sock, F_SETFL, fcntl(w->sock, F_GETFL) | O_NONBLOCK);
    fcntl(w->out, F_SETFL, fcntl(w->out, F_GETFL) | O_NONBLOCK);
    rc = 0;
    *out = w;
    w = NULL;
fail:
    for (int i = 0; i < 2; i++) {
        if (sv[i] >= 0) close(sv[i]);
        if (op[i] >= 0) close(op[i]);
    }
    if (lock >= 0) close(lock);
    if (exe >= 0) close(exe);
    if (devnull >= 0) close(devnull);
    strv_free(argv);
    strv_free(envp);
    if (w) kwb_worker_free(w);
    return rc;
}

const char *kwb_worker_scratch(const kwb_worker *w) { return w->scratch; }

static void drain_output(kwb_worker *w);

void kwb_worker_status(kwb_worker *w, kwb_worker_state *st) {
    if (w->alive && waitpid(w->pid, &w->status, WNOHANG) == w->pid) {   /* it died unwatched */
        w->alive = 0;
        kill(-w->pid, SIGKILL);
        drain_output(w);
        if (w->sock >= 0) { close(w->sock); w->sock = -1; }
    }
    *st = (kwb_worker_state){.pid = w->pid, .alive = w->alive, .exit_code = -1, .killed = w->killed,
                             .isolated = w->isolated, .uid = w->uid, .output_total = w->out_total};
    if (!w->alive) {
        if (WIFEXITED(w->status)) st->exit_code = WEXITSTATUS(w->status);
        if (WIFSIGNALED(w->status)) st->signal = WTERMSIG(w->status);
    }
}

/* Read what the output pipe holds now; keep the first cap_max bytes. */
static void drain_output(kwb_worker *w) {
    if (w->out < 0) return;
    char chunk[65536];
    for (;;) {
        ssize_t r = read(w->out, chunk, sizeof chunk);
        if (r < 0 && errno == EINTR) continue;
        if (r == 0) { close(w->out); w->out = -1; return; }
        if (r < 0) return;
        w->out_total += (uint64_t)r;
        size_t keep = w->cap_len < w->cap_max ? w->cap_max - w->cap_len : 0;
        if (keep > (size_t)r) keep = (size_t)r;
        if (keep) {
            char *nc = realloc(w->cap, w->cap_len + keep + 1);
            if (!nc) continue;
            w->cap = nc;
            memcpy(w->cap + w->cap_len, chunk, keep);
            w->cap_len += keep;
        }
    }
}

static void reap(kwb_worker *w, int force) {
    if (!w->alive) return;
    if (!force) {   /* it closed its socket: give it a moment to exit on its own */
        for (int i = 0; i < 50; i++) {
            pid_t r = waitpid(w->pid, &w->status, WNOHANG);
            if (r == w->pid) { w->alive = 0; break; }
            if (r < 0 && errno != EINTR) { w->alive = 0; w->status = 0; break; }
            usleep(2000);
        }
    }
    if (w->alive) {
        w->killed = 1;
        kill(-w->pid, SIGKILL);
        kill(w->pid, SIGKILL);
        while (waitpid(w->pid, &w->status, 0) < 0 && errno == EINTR) {}
        w->alive = 0;
    }
    kill(-w->pid, SIGKILL);   /* whatever it left behind in its group */
    drain_output(w);
    if (w->sock >= 0) { close(w->sock); w->sock = -1; }
}

void kwb_worker_kill(kwb_worker *w) { reap(w, 1); }

int kwb_worker_send(kwb_worker *w, const void *data, size_t len) {
    if (!w->alive || w->sock < 0) return kwb_fail(KWB_EIO, "worker %d is gone", (int)w->pid);
    if (len > MAX_FRAME) return kwb_fail(KWB_EINVAL, "a frame of %zu bytes is over the %zu limit", len, MAX_FRAME);
    unsigned char hdr[4] = {(unsigned char)(len >> 24), (unsigned char)(len >> 16), (unsigned char)(len >> 8),
                            (unsigned char)len};
    struct { const unsigned char *p; size_t n; } parts[2] = {{hdr, 4}, {data, len}};
    for (int i = 0; i < 2; i++) {
        size_t off = 0;
        while (off < parts[i].n) {
            ssize_t r = send(w->sock, parts[i].p + off, parts[i].n - off, MSG_NOSIGNAL);
            if (r < 0 && errno == EINTR) continue;
            if (r < 0 && errno == EAGAIN) {
                struct pollfd p = {w->sock, POLLOUT, 0};
                poll(&p, 1, 100);
                drain_output(w);
                continue;
            }
            if (r < 0) return kwb_fail(KWB_EIO, "worker %d is gone: %s", (int)w->pid, strerror(errno));
            off += (size_t)r;
        }
    }
    return 0;
}

/* A whole frame at the front of w->in? Hand it out. */
static int take_frame(kwb_worker *w, char **msg, size_t *len) {
    if (w->in_len < 4) return 0;
    size_t n = (size_t)w->in[0] << 24 | (size_t)w->in[1] << 16 | (size_t)w->in[2] << 8 | w->in[3];
    if (n > MAX_FRAME) return -1;
    if (w->in_len < 4 + n) return 0;
    char *m = malloc(n + 1);
    if (!m) return -1;
    memcpy(m, w->in + 4, n);
    m[n] = 0;
    memmove(w->in, w->in + 4 + n, w->in_len - 4 - n);
    w->in_len -= 4 + n;
    *msg = m;
    *len = n;
    return 1;
}

/* Read the socket; 0 ok, -1 the worker is gone or broke the protocol. */
static int read_sock(kwb_worker *w) {
    for (;;) {
        if (w->in_cap - w->in_len < 65536) {
            size_t nc = w->in_cap ? w->in_cap * 2 : 131072;
            if (nc > MAX_FRAME + 131072) return -1;
            unsigned char *ni = realloc(w->in, nc);
            if (!ni) return -1;
            w->in = ni;
            w->in_cap = nc;
        }
        ssize_t r = read(w->sock, w->in + w->in_len, w->in_cap - w->in_len);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && errno == EAGAIN) return 0;
        if (r <= 0) return -1;
        w->in_len += (size_t)r;
    }
}

int kwb_worker_wait(kwb_worker *const *ws, uint32_t n, double timeout_s, uint32_t *which,
                    char **msg, size_t *len) {
    *msg = NULL;
    *len = 0;
    double end = timeout_s >= 0 ? kwb_now() + timeout_s : 0;
    struct pollfd *pf = calloc(2 * (size_t)n + 1, sizeof *pf);
    if (!pf) return kwb_fail(KWB_ENOMEM, "out of memory");
    int rc = KWB_WORKER_TIMEOUT;
    for (;;) {
        for (uint32_t i = 0; i < n; i++) {
            int t = ws[i]->alive ? take_frame(ws[i], msg, len) : 0;
            if (t == 1) { *which = i; rc = KWB_WORKER_MESSAGE; goto done; }
            if (t < 0) { reap(ws[i], 1); *which = i; rc = KWB_WORKER_EXITED; goto done; }
        }
        nfds_t k = 0;
        for (uint32_t i = 0; i < n; i++) {
            if (!ws[i]->alive) continue;
            pf[k++] = (struct pollfd){ws[i]->sock, POLLIN, 0};
            if (ws[i]->out >= 0) pf[k++] = (struct pollfd){ws[i]->out, POLLIN, 0};
        }
        int ms = -1;
        if (timeout_s >= 0) {
            double left = end - kwb_now();
            if (left <= 0) { rc = KWB_WORKER_TIMEOUT; goto done; }
            ms = (int)(left * 1000) + 1;
        }
        if (k == 0 && ms < 0) { rc = kwb_fail(KWB_EINVAL, "waiting on no live worker"); goto done; }
        int pr = poll(pf, k, ms);
        if (pr < 0 && errno != EINTR) { rc = kwb_fail(KWB_EIO, "poll failed: %s", strerror(errno)); goto done; }
        for (uint32_t i = 0; i < n; i++) {
            kwb_worker *w = ws[i];
            if (!w->alive) continue;
            drain_output(w);
            if (read_sock(w) != 0) {
                int t = take_frame(w, msg, len);   /* its last words first */
                if (t == 1) { *which = i; rc = KWB_WORKER_MESSAGE; goto done; }
                reap(w, 0);
                *which = i;
                rc = KWB_WORKER_EXITED;
                goto done;
            }
        }
    }
done:
    free(pf);
    return rc;
}

char *kwb_worker_take_output(kwb_worker *w, size_t *len, uint64_t *total) {
    drain_output(w);
    char *s = w->cap ? w->cap : malloc(1);
    if (!s) return NULL;
    *len = w->cap_len;
    s[w->cap_len] = 0;
    *total = w->out_total;
    w->cap = NULL;
    w->cap_len = 0;
    w->out_total = 0;
    return s;
}

void kwb_worker_free(kwb_worker *w) {
    if (!w) return;
    if (w->alive) reap(w, 1);
    if (w->sock >= 0) close(w->sock);
    if (w->out >= 0) close(w->out);
    drop_scratch(w);
    free(w->scratch);
    free(w->in);
    free(w->cap);
    free(w);
}

/* ---- the worker's side --------------------------------------------------- */

static int read_full(int fd, void *buf, size_t n) {
    size_t off = 0;
    while (off < n) {
        ssize_t r = read(fd, (char *)buf + off, n - off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return off == 0 && r == 0 ? 0 : -1;
        off += (size_t)r;
    }
    return 1;
}

int kwb_worker_recv(char **msg, size_t *len) {
    *msg = NULL;
    unsigned char hdr[4];
    int r = read_full(FD_PROTO, hdr, 4);
    if (r == 0) return 0;
    if (r < 0) return kwb_fail(KWB_EIO, "the worker's channel broke: %s", strerror(errno));
    size_t n = (size_t)hdr[0] << 24 | (size_t)hdr[1] << 16 | (size_t)hdr[2] << 8 | hdr[3];
    if (n > MAX_FRAME) return kwb_fail(KWB_EIO, "a frame of %zu bytes is over the limit", n);
    char *m = malloc(n + 1);
    if (!m) return kwb_fail(KWB_ENOMEM, "out of memory");
    if (n && read_full(FD_PROTO, m, n) != 1) { free(m); return kwb_fail(KWB_EIO, "a frame was cut short"); }
    m[n] = 0;
    *msg = m;
    *len = n;
    return 1;
}

int kwb_worker_reply(const void *data, size_t len) {
    if (len > MAX_FRAME) return kwb_fail(KWB_EINVAL, "a reply of %zu bytes is over the limit", len);
    unsigned char hdr[4] = {(unsigned char)(len >> 24), (unsigned char)(len >> 16), (unsigned char)(len >> 8),
                            (unsigned char)len};
    const unsigned char *parts[2] = {hdr, data};
    size_t sizes[2] = {4, len};
    for (int i = 0; i < 2; i++) {
        size_t off = 0;
        while (off < sizes[i]) {
            ssize_t r = send(FD_PROTO, parts[i] + off, sizes[i] - off, MSG_NOSIGNAL);
            if (r < 0 && errno == EINTR) continue;
            if (r < 0) return kwb_fail(KWB_EIO, "cannot reply: %s", strerror(errno));
            off += (size_t)r;
        }
    }
    return 0;
}

int kwb_worker_lock(int32_t on) {
    if (fcntl(FD_LOCK, F_GETFD) < 0) return 0;
    while (flock(FD_LOCK, on ? LOCK_EX : LOCK_UN) != 0)
        if (errno != EINTR) return kwb_fail(KWB_EIO, "device lock: %s", strerror(errno));
    return 1;
}

/* The judge's own children that outlive a request (a PyTorch problem's
 * reference process, core/lua_child.c): kwb_worker_reap leaves them, and
 * their exit status, alone. Only this process registers them; a candidate
 * runs in a sandbox process of its own and cannot. */
#define KEPT_MAX 16
static pid_t kept[KEPT_MAX];

void kwb_worker_keep(int pid, int keep) {
    for (int i = 0; i < KEPT_MAX; i++) {
        if (keep && kept[i] == 0) { kept[i] = (pid_t)pid; return; }
        if (!keep && kept[i] == (pid_t)pid) { kept[i] = 0; return; }
    }
}

static int is_kept(pid_t pid) {
    for (int i = 0; i < KEPT_MAX; i++) if (pid > 0 && kept[i] == pid) return 1;
    return 0;
}

/* Children of this process (strays reparented here too: the worker is a
 * subreaper), killed and reaped until none is left, but the kept ones. */
int kwb_worker_reap(void) {
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    pid_t me = getpid();
    int total = 0;
    for (int round = 0; round < 100; round++) {
        int found = 0;
        DIR *d = opendir("/proc");
        if (!d) break;
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
            char p[300], buf[512];
            snprintf(p, sizeof p, "/proc/%s/stat", e->d_name);
            int fd = open(p, O_RDONLY | O_CLOEXEC);
            if (fd < 0) continue;
            ssize_t r = read(fd, buf, sizeof buf - 1);
            close(fd);
            if (r <= 0) continue;
            buf[r] = 0;
            char *rp = strrchr(buf, ')');   /* the name may hold spaces and parentheses */
            int ppid = 0;
            char st;
            if (!rp || sscanf(rp + 1, " %c %d", &st, &ppid) != 2 || ppid != me) continue;
            pid_t pid = (pid_t)atoi(e->d_name);
            if (is_kept(pid)) continue;
            kill(pid, SIGKILL);
            waitpid(pid, NULL, WNOHANG);   /* (one not dead yet is found again in the next round) */
            found++;
        }
        closedir(d);
        if (!found) break;
        total += found;
        usleep(1000);
    }
    return total;
}
