/* sandbox.c: a host candidate's own process. The judge (its caller) keeps
 * the reference, the expected outputs, the comparison and the clock; the
 * sandbox gets the candidate's module, its buffers (memfds, mapped between
 * guard pages of its own) and one socket. kwb.h says what each side may
 * rely on; docs/architecture.md why. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ffi.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "error.h"
#include "host_ffi.h"
#include "kwb.h"
#include "timing.h"

enum { FD_CHAN = 3, FD_MODULE = 4, MAX_ARGS = 64, MAX_SLOTS = 4096 };
enum { OP_CALL = 1, OP_MAP, OP_UNMAP, OP_READY = 10, OP_DONE, OP_MAPPED, OP_FAIL, OP_SYSCALL };

/* One message either way (a SOCK_SEQPACKET record). */
typedef struct {
    uint32_t op, seq, nargs, slot;   /* CALL, MAP, UNMAP: slot 1 to be answered; MAPPED: nargs, how many are
                                        mapped; SYSCALL: slot, the number */
    uint64_t bytes, data_offset;     /* MAP: the memfd's size, where its data starts */
    int32_t status;                  /* FAIL: a kwb_status */
    int32_t bufslot[MAX_ARGS];       /* CALL: -1 for a scalar, else the slot of the buffer */
    kwb_value args[MAX_ARGS], ret;
    char text[256];                  /* FAIL: why */
} sb_msg;

static size_t page_bytes(void) {
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096;
}

static int send_msg(int fd, const sb_msg *m, int pass_fd) {
    struct iovec iov = {(void *)m, sizeof *m};
    union { char buf[CMSG_SPACE(sizeof(int))]; struct cmsghdr align; } u;
    struct msghdr h = {.msg_iov = &iov, .msg_iovlen = 1};
    if (pass_fd >= 0) {
        h.msg_control = u.buf;
        h.msg_controllen = sizeof u.buf;
        struct cmsghdr *c = CMSG_FIRSTHDR(&h);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
    }
    ssize_t n;
    do n = sendmsg(fd, &h, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    return n == (ssize_t)sizeof *m ? 0 : -1;
}

/* 1 with a message (and *got_fd when one came with it), 2 for a record of
 * another size (not one of ours), 0 at the end, -1 on error. */
static int recv_msg(int fd, sb_msg *m, int *got_fd, int flags) {
    struct iovec iov = {m, sizeof *m};
    union { char buf[CMSG_SPACE(sizeof(int))]; struct cmsghdr align; } u;
    struct msghdr h = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
    ssize_t n;
    do n = recvmsg(fd, &h, flags | MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    if (got_fd) *got_fd = -1;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&h); c; c = CMSG_NXTHDR(&h, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            int f;
            memcpy(&f, CMSG_DATA(c), sizeof f);
            if (got_fd && *got_fd < 0) *got_fd = f;
            else close(f);
        }
    if (n == 0) return 0;
    if (n < 0) return -1;
    return n == (ssize_t)sizeof *m ? 1 : 2;   /* 2: a record of another size, ignored */
}

/* ==== the sandbox's side ================================================= */

static void on_sigsys(int sig, siginfo_t *si, void *uc) {
    (void)sig; (void)uc;
    static sb_msg m;   /* a handler's message: static, not on a stack the kernel may have spoiled */
    m.op = OP_SYSCALL;
    m.slot = (uint32_t)si->si_syscall;
    send_msg(FD_CHAN, &m, -1);
    syscall(SYS_exit_group, 111);
}

/* The system calls a running kernel may make: memory, the clock, its two
 * sockets' messages (the protocol), writes to stdout and stderr. */
static int allow_running(scmp_filter_ctx f) {
    int rc = 0;
#define ALLOW(name, ...) rc |= seccomp_rule_add(f, SCMP_ACT_ALLOW, SCMP_SYS(name), __VA_ARGS__)
    ALLOW(recvmsg, 1, SCMP_A0(SCMP_CMP_EQ, FD_CHAN));
    ALLOW(sendmsg, 1, SCMP_A0(SCMP_CMP_EQ, FD_CHAN));
    ALLOW(write, 1, SCMP_A0(SCMP_CMP_EQ, 1));
    ALLOW(write, 1, SCMP_A0(SCMP_CMP_EQ, 2));
    ALLOW(fstat, 0);
    ALLOW(newfstatat, 1, SCMP_A3(SCMP_CMP_EQ, AT_EMPTY_PATH));
    ALLOW(ioctl, 2, SCMP_A0(SCMP_CMP_LE, 2), SCMP_A1(SCMP_CMP_EQ, TCGETS));
    ALLOW(mmap, 1, SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));
    ALLOW(mprotect, 1, SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));
    ALLOW(munmap, 0);
    ALLOW(mremap, 0);
    ALLOW(brk, 0);
    ALLOW(madvise, 0);
    ALLOW(close, 0);
    ALLOW(getrandom, 0);
    ALLOW(clock_gettime, 0);
    ALLOW(clock_getres, 0);
    ALLOW(gettimeofday, 0);
    ALLOW(time, 0);
    ALLOW(getpid, 0);
    ALLOW(gettid, 0);
    ALLOW(sched_yield, 0);
    ALLOW(exit, 0);
    ALLOW(exit_group, 0);
    return rc;
}

/* While the module loads (its constructors run then): reading files as well,
 * and mapping them executable; never writing, creating or starting anything. */
static int allow_loading(scmp_filter_ctx f) {
    int rc = allow_running(f);
    int writes = O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | O_APPEND;
    ALLOW(openat, 1, SCMP_A2(SCMP_CMP_MASKED_EQ, (scmp_datum_t)writes, 0));
    ALLOW(read, 0);
    ALLOW(pread64, 0);
    ALLOW(lseek, 0);
    ALLOW(newfstatat, 0);
    ALLOW(mmap, 0);
    ALLOW(mprotect, 0);
    ALLOW(seccomp, 0);   /* the second filter */
    ALLOW(prctl, 0);
    ALLOW(futex, 0);
    ALLOW(rt_sigprocmask, 0);
#undef ALLOW
    return rc;
}

static int load_filter(int loading) {
    scmp_filter_ctx f = seccomp_init(SCMP_ACT_TRAP);
    if (!f) return -1;
    int rc = loading ? allow_loading(f) : allow_running(f);
    if (rc == 0) rc = seccomp_load(f);
    seccomp_release(f);
    return rc;
}

static void child_fail(int status, const char *fmt, const char *a, const char *b) {
    sb_msg m = {.op = OP_FAIL, .status = status};
    snprintf(m.text, sizeof m.text, fmt, a, b ? b : "");
    send_msg(FD_CHAN, &m, -1);
}

/* The buffers mapped in the sandbox: those of the calls at hand, no others
 * (the judge sends UNMAP before calls that do not use them all). A slot is
 * the buffer's whole mapping (its guard pages too) and where its data starts. */
static struct { unsigned char *base; size_t bytes; void *data; } slots[MAX_SLOTS];
static uint32_t used;

static void unmap_all(void) {
    for (uint32_t i = 0; i < used; i++) munmap(slots[i].base, slots[i].bytes);
    memset(slots, 0, used * sizeof *slots);
    used = 0;
}

/* MAP: the memfd between guard pages of the sandbox's own, in the next slot. */
static int map_one(const sb_msg *m, int fd, size_t page) {
    size_t bytes = m->bytes + 2 * page;
    unsigned char *base = used == MAX_SLOTS ? MAP_FAILED
                          : mmap(NULL, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (fd < 0 || base == MAP_FAILED ||
        mmap(base + page, m->bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) == MAP_FAILED)
        return -1;
    slots[used].base = base;
    slots[used].bytes = bytes;
    slots[used++].data = base + page + m->data_offset;
    return 0;
}

int kwb_sandbox_main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "kwb: --sandbox-child is started by kwb itself, with a module on fd 4 and a channel on fd 3\n");
        return 2;
    }
    const char *symbol = argv[2], *sig = argv[3];
    struct sigaction sa = {.sa_sigaction = on_sigsys, .sa_flags = SA_SIGINFO};
    sigaction(SIGSYS, &sa, NULL);
    if (load_filter(1) != 0) { child_fail(KWB_EIO, "the sandbox cannot load its system call filter%s%s", "", NULL); return 1; }
    void *h = dlopen("/proc/self/fd/4", RTLD_NOW | RTLD_LOCAL);
    if (!h) { child_fail(KWB_EIO, "the module does not load: %s%s", dlerror(), NULL); return 1; }
    close(FD_MODULE);
    dlerror();
    void *fn = dlsym(h, symbol);
    if (!fn) { child_fail(KWB_ENOSYM, "no function %s in the module%s", symbol, NULL); return 1; }
    size_t nargs = strlen(sig) - 1;
    kwb_ctype ret = (kwb_ctype)(sig[0] - '0'), types[MAX_ARGS];
    ffi_type *ftypes[MAX_ARGS];
    ffi_cif cif;
    for (size_t i = 0; i < nargs && i < MAX_ARGS; i++) {
        types[i] = (kwb_ctype)(sig[i + 1] - '0');
        ftypes[i] = kwb_host_ffi_type(types[i]);
    }
    if (nargs > MAX_ARGS || ffi_prep_cif(&cif, FFI_DEFAULT_ABI, (unsigned)nargs, kwb_host_ffi_type(ret), ftypes) != FFI_OK) {
        child_fail(KWB_EINVAL, "libffi cannot describe %s%s", symbol, NULL);
        return 1;
    }
    if (load_filter(0) != 0) { child_fail(KWB_EIO, "the sandbox cannot load its system call filter%s%s", "", NULL); return 1; }
    static sb_msg m;
    m = (sb_msg){.op = OP_READY};
    if (send_msg(FD_CHAN, &m, -1)) return 1;
    size_t page = page_bytes();
    for (;;) {
        int fd = -1;
        int got = recv_msg(FD_CHAN, &m, &fd, 0);
        if (got <= 0) return 0;   /* the judge hung up */
        if (m.op == OP_MAP || m.op == OP_UNMAP) {
            if (m.op == OP_UNMAP) unmap_all();
            else if (map_one(&m, fd, page)) {
                child_fail(KWB_ENOMEM, "the sandbox cannot map a buffer%s%s", "", NULL);
                return 1;
            }
            if (fd >= 0) close(fd);   /* the mapping keeps the memory: no descriptor outlives it */
            if (!m.slot) continue;    /* the last of a set is answered */
            m.op = OP_MAPPED;
            m.nargs = used;
            if (send_msg(FD_CHAN, &m, -1)) return 1;
        } else if (m.op == OP_CALL) {
            if (fd >= 0) close(fd);
            void *values[MAX_ARGS];
            for (size_t i = 0; i < nargs; i++) {
                if (types[i] == KWB_C_PTR && m.bufslot[i] >= 0)
                    m.args[i].ptr = (uint32_t)m.bufslot[i] < used ? slots[m.bufslot[i]].data : NULL;
                values[i] = &m.args[i];
            }
            kwb_value r;
            kwb_host_ffi_call(&cif, fn, ret, values, &r);
            if (!m.slot) continue;   /* one of several queued calls: only the last is answered */
            m.op = OP_DONE;
            m.ret = r;
            if (send_msg(FD_CHAN, &m, -1)) return 1;
        } else {
            if (fd >= 0) close(fd);
        }
    }
}

/* ==== the judge's side ==================================================== */

struct kwb_sandbox {
    pid_t pid;
    int chan, status_fd, alive;
    clockid_t clock;
    uint32_t nargs, seq;
    kwb_ctype args[MAX_ARGS];
    double cpu_end;                  /* its CPU clock when it last fell asleep */
    unsigned long nvcsw;             /* its voluntary context switches then */
    uint64_t *mapped;                /* the serials of the buffers mapped there, by slot */
    uint32_t nmapped;
    char forbidden[120];             /* the system call it was stopped at, when one */
    cpu_set_t judge_cpus;            /* the caller's processors before the sandbox */
    int pinned;
};

static double cpu_now(const kwb_sandbox *s) {
    struct timespec ts;
    if (clock_gettime(s->clock, &ts) != 0) return -1;
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Its scheduler state ('S' asleep, 'R' running, ...) and voluntary context
 * switches, from /proc/PID/status; 0 when it is gone. */
static char proc_state(const kwb_sandbox *s, unsigned long *nvcsw) {
    char buf[4096];
    ssize_t n = pread(s->status_fd, buf, sizeof buf - 1, 0);
    if (n <= 0) return 0;
    buf[n] = 0;
    const char *st = strstr(buf, "\nState:"), *v = strstr(buf, "\nvoluntary_ctxt_switches:");
    if (!st || !v) return 0;
    st += 7;
    while (*st == ' ' || *st == '\t') st++;
    *nvcsw = strtoul(v + 25, NULL, 10);
    return *st;
}

static void reap(kwb_sandbox *s, kwb_sandbox_result *r) {
    int st = 0;
    pid_t w;
    do w = waitpid(s->pid, &st, 0);
    while (w < 0 && errno == EINTR);
    s->alive = 0;
    if (!r) return;
    if (s->forbidden[0]) {
        r->outcome = KWB_SANDBOX_FORBIDDEN;
        snprintf(r->detail, sizeof r->detail, "%s", s->forbidden);
    } else if (r->outcome == KWB_SANDBOX_TIMEOUT) {
        return;
    } else {
        r->outcome = KWB_SANDBOX_CRASHED;
        if (w < 0) snprintf(r->detail, sizeof r->detail, "its process ended");
        else if (WIFSIGNALED(st)) {
            const char *abbrev = sigabbrev_np(WTERMSIG(st)), *text = sigdescr_np(WTERMSIG(st));
            snprintf(r->detail, sizeof r->detail, "died of SIG%s (%s)", abbrev ? abbrev : "?", text ? text : "?");
        } else snprintf(r->detail, sizeof r->detail, "exited with status %d", WEXITSTATUS(st));
    }
}

static void end(kwb_sandbox *s, kwb_sandbox_result *r) {
    if (!s->alive) return;
    kill(s->pid, SIGKILL);
    reap(s, r);
}

static void note_syscall(kwb_sandbox *s, uint32_t nr) {
    char *name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, (int)nr);
    snprintf(s->forbidden, sizeof s->forbidden, "system call %s (number %u), which the sandbox does not allow",
             name ? name : "?", nr);
    free(name);
}

/* Wait for the reply to seq (op want): 0, or 1 when the sandbox ended or
 * passed the limit (r says which; the process is reaped). */
static int await(kwb_sandbox *s, uint32_t seq, uint32_t want, double c0, double limit_s, sb_msg *m,
                 kwb_sandbox_result *r, int *got_fd) {
    double t0 = kwb_now(), wall_limit = 3 * limit_s + 5;
    for (;;) {
        struct pollfd p = {s->chan, POLLIN, 0};   /* asleep: the sandbox runs on this processor */
        int n = poll(&p, 1, 20);
        if (n > 0 && (p.revents & POLLIN)) {
            int got = recv_msg(s->chan, m, got_fd, MSG_DONTWAIT);
            if (got == 1 && m->op == OP_SYSCALL) note_syscall(s, m->slot);
            else if (got == 1 && m->op == want && m->seq == seq) return 0;
            else if (got == 1 && m->op == OP_FAIL) {
                r->outcome = KWB_SANDBOX_CRASHED;
                snprintf(r->detail, sizeof r->detail, "%s", m->text);
                end(s, NULL);
                return 1;
            }
            if (got == 0 || (got < 0 && errno != EAGAIN)) { end(s, r); return 1; }
            if (got_fd && *got_fd >= 0) { close(*got_fd); *got_fd = -1; }
            continue;
        }
        if (n > 0 && (p.revents & (POLLHUP | POLLERR))) { end(s, r); return 1; }
        double cpu = cpu_now(s);
        if ((cpu >= 0 && cpu - c0 > limit_s) || kwb_now() - t0 > wall_limit) {
            r->outcome = KWB_SANDBOX_TIMEOUT;
            snprintf(r->detail, sizeof r->detail, "past its limit of %g s", limit_s);
            end(s, r);
            return 1;
        }
    }
}

/* After a reply: wait until the sandbox sleeps again (it switched out since
 * its last sleep and is asleep now), then read its CPU clock, exact once it
 * is off the processor. 0, or 1 when it ended or passed the limit. */
static int settle(kwb_sandbox *s, double c0, double limit_s, double *cpu, kwb_sandbox_result *r) {
    double t0 = kwb_now();
    for (int spin = 0;; spin++) {
        unsigned long v = 0;
        char st = proc_state(s, &v);
        if (!st || st == 'Z' || st == 'X') { end(s, r); return 1; }
        if (st == 'S' && v > s->nvcsw) {
            *cpu = cpu_now(s);
            unsigned long v2 = 0;
            if (proc_state(s, &v2) == 'S' && v2 == v) {   /* still the same sleep: the reading is of it */
                s->nvcsw = v;
                return 0;
            }
            continue;
        }
        double now_cpu = cpu_now(s);
        if (now_cpu - c0 > limit_s || kwb_now() - t0 > 3 * limit_s + 5) {
            r->outcome = KWB_SANDBOX_TIMEOUT;
            snprintf(r->detail, sizeof r->detail, "past its limit of %g s", limit_s);
            end(s, r);
            return 1;
        }
        if (spin < 200) sched_yield();
        else {
            struct timespec ts = {0, 50000};
            nanosleep(&ts, NULL);
        }
    }
}

int kwb_sandbox_start(const char *path, const char *symbol, kwb_ctype ret, const kwb_ctype *args,
                      uint32_t nargs, kwb_sandbox **out) {
    *out = NULL;
    if (nargs > MAX_ARGS) return kwb_fail(KWB_EINVAL, "%s: more than %d arguments", symbol, MAX_ARGS);
    char sig[MAX_ARGS + 2];
    sig[0] = (char)('0' + ret);
    for (uint32_t i = 0; i < nargs; i++) sig[i + 1] = (char)('0' + args[i]);
    sig[nargs + 1] = 0;
    int mod = open(path, O_RDONLY | O_CLOEXEC);
    if (mod < 0) return kwb_fail(KWB_EIO, "cannot open %s: %s", path, strerror(errno));
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
        close(mod);
        return kwb_fail(KWB_EIO, "cannot make the sandbox's channel: %s", strerror(errno));
    }
    kwb_sandbox *s = calloc(1, sizeof *s);
    if (!s) { close(mod); close(sv[0]); close(sv[1]); return kwb_fail(KWB_ENOMEM, "out of memory"); }
    s->mapped = calloc(MAX_SLOTS, sizeof *s->mapped);
    if (!s->mapped) { free(s); close(mod); close(sv[0]); close(sv[1]); return kwb_fail(KWB_ENOMEM, "out of memory"); }
    char *const argv[] = {"kwb", "--sandbox-child", (char *)symbol, sig, NULL};
    char *const envp[] = {NULL};
    int root = geteuid() == 0;
    pid_t parent = getpid();
    /* while the module's constructors run, unfiltered reads of files are
     * allowed: this process is not dumpable meanwhile, so its memory is not
     * one of them (/proc/PID/mem needs ptrace access) */
    int dumpable = prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    /* The sandbox and its caller share one processor (the caller's now) for
     * the sandbox's life: the inputs the caller draws before each call are
     * in that processor's caches when the kernel runs, every call alike, and
     * no run depends on which processor the scheduler picked. */
    int cpu = sched_getcpu();
    if (cpu >= 0 && sched_getaffinity(0, sizeof s->judge_cpus, &s->judge_cpus) == 0) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        s->pinned = sched_setaffinity(0, sizeof one, &one) == 0;
    }
    pid_t pid = fork();
    if (pid == 0) {   /* only async-signal-safe calls until exec */
        int c = fcntl(sv[1], F_DUPFD, 10), m = fcntl(mod, F_DUPFD, 10);   /* out of the way first */
        if (c < 0 || m < 0 || dup2(c, FD_CHAN) < 0 || dup2(m, FD_MODULE) < 0) _exit(126);
        syscall(SYS_close_range, FD_MODULE + 1, ~0u, 0);
        int keep[] = {FD_CHAN, FD_MODULE};
        for (int i = 0; i < 2; i++) fcntl(keep[i], F_SETFD, 0);
        struct rlimit zero = {0, 0};
        setrlimit(RLIMIT_CORE, &zero);
        if (root && (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0)) _exit(125);
        prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        if (getppid() != parent) _exit(125);
        int e = open("/proc/self/exe", O_RDONLY);   /* this very program, whatever its path */
        if (e < 0) _exit(127);
        syscall(SYS_execveat, e, "", argv, envp, AT_EMPTY_PATH);
        _exit(127);
    }
    close(sv[1]);
    close(mod);
    if (pid < 0) {
        prctl(PR_SET_DUMPABLE, dumpable, 0, 0, 0);
        if (s->pinned) sched_setaffinity(0, sizeof s->judge_cpus, &s->judge_cpus);
        close(sv[0]);
        free(s->mapped);
        free(s);
        return kwb_fail(KWB_EIO, "cannot start a sandbox: %s", strerror(errno));
    }
    s->pid = pid;
    s->chan = sv[0];
    s->alive = 1;
    s->nargs = nargs;
    memcpy(s->args, args, nargs * sizeof *args);
    char p[64];
    snprintf(p, sizeof p, "/proc/%d/status", (int)pid);
    s->status_fd = open(p, O_RDONLY | O_CLOEXEC);
    if (s->status_fd < 0 || clock_getcpuclockid(pid, &s->clock) != 0) {
        prctl(PR_SET_DUMPABLE, dumpable, 0, 0, 0);
        kwb_sandbox_free(s);
        return kwb_fail(KWB_EIO, "cannot watch the sandbox (pid %d): %s", (int)pid, strerror(errno));
    }
    sb_msg m;
    kwb_sandbox_result r = {0};
    int ended = await(s, 0, OP_READY, 0, 60, &m, &r, NULL);
    prctl(PR_SET_DUMPABLE, dumpable, 0, 0, 0);
    if (ended) {
        int status = m.op == OP_FAIL && m.status ? m.status : KWB_EIO, rc;
        if (r.outcome == KWB_SANDBOX_FORBIDDEN)   /* a constructor of the module's */
            rc = kwb_fail(KWB_ERUN, "while its module loaded, the candidate made a %s", r.detail);
        else if (status == KWB_ENOSYM) rc = kwb_fail(KWB_ENOSYM, "%s", r.detail);
        else rc = kwb_fail(status, "the sandbox did not start: %s", r.detail);
        kwb_sandbox_free(s);
        return rc;
    }
    double asleep;
    if (settle(s, 0, 60, &asleep, &r)) {
        kwb_sandbox_free(s);
        return kwb_fail(KWB_EIO, "the sandbox did not start: %s", r.detail);
    }
    s->cpu_end = asleep;
    *out = s;
    return 0;
}

/* Send count records at once (one sendmmsg a chunk: the sandbox, on this
 * processor, wakes to find them all), each with fds[j] passed where >= 0.
 * 0, or -1 when the channel failed. */
static int send_all(int chan, sb_msg *m, const int *fds, uint32_t count) {
    enum { CHUNK = 64 };
    struct mmsghdr hs[CHUNK];
    struct iovec iov[CHUNK];
    union { char buf[CMSG_SPACE(sizeof(int))]; struct cmsghdr align; } u[CHUNK];
    for (uint32_t done = 0; done < count;) {
        uint32_t k = count - done < CHUNK ? count - done : CHUNK;
        for (uint32_t j = 0; j < k; j++) {
            iov[j] = (struct iovec){&m[done + j], sizeof m[done + j]};
            hs[j] = (struct mmsghdr){.msg_hdr = {.msg_iov = &iov[j], .msg_iovlen = 1}};
            if (fds && fds[done + j] >= 0) {
                hs[j].msg_hdr.msg_control = u[j].buf;
                hs[j].msg_hdr.msg_controllen = sizeof u[j].buf;
                struct cmsghdr *c = CMSG_FIRSTHDR(&hs[j].msg_hdr);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(sizeof(int));
                memcpy(CMSG_DATA(c), &fds[done + j], sizeof(int));
            }
        }
        for (uint32_t sent = 0; sent < k;) {
            int n = sendmmsg(chan, hs + sent, k - sent, MSG_NOSIGNAL);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) return -1;
            sent += (uint32_t)n;
        }
        done += k;
    }
    return 0;
}

static int64_t slot_in(const kwb_sandbox *s, uint64_t serial) {
    for (uint32_t i = 0; i < s->nmapped; i++)
        if (s->mapped[i] == serial) return i;
    return -1;
}

static int crashed(kwb_sandbox *s, kwb_sandbox_result *r, const char *why) {
    r->outcome = KWB_SANDBOX_CRASHED;
    snprintf(r->detail, sizeof r->detail, "%s", why);
    end(s, NULL);
    return 1;
}

/* The buffers of the calls at hand (n of them, NULL entries skipped) mapped
 * in the sandbox and no other: where one mapped there is not among them,
 * every mapping goes first (UNMAP), so while these calls run the candidate
 * can reach only their buffers; slot[i] is bufs[i]'s. One round trip, none
 * when they are mapped already (a shape's runs, call after call). 0, or 1
 * when the sandbox ended (r says why). */
static int map_calls(kwb_sandbox *s, uint32_t n, kwb_buffer *const *bufs, int32_t *slot, kwb_sandbox_result *r) {
    kwb_buffer_shared *sh = calloc(n ? n : 1, sizeof *sh);
    sb_msg *m = calloc(n + 1, sizeof *m);
    int *fds = calloc(n + 1, sizeof *fds);
    uint64_t *want = calloc(n ? n : 1, sizeof *want);
    int rc = 1;
    if (!sh || !m || !fds || !want) { crashed(s, r, "out of memory"); goto out; }
    uint32_t nwant = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (!bufs[i]) continue;
        if (kwb_buffer_share(bufs[i], &sh[i])) { crashed(s, r, kwb_last_error()); goto out; }
        int seen = 0;
        for (uint32_t j = 0; j < nwant && !seen; j++) seen = want[j] == sh[i].serial;
        if (!seen) want[nwant++] = sh[i].serial;
    }
    int keep = 1;   /* every buffer mapped now is one of these calls' */
    for (uint32_t i = 0; i < s->nmapped && keep; i++) {
        int found = 0;
        for (uint32_t j = 0; j < nwant && !found; j++) found = want[j] == s->mapped[i];
        keep = found;
    }
    uint32_t count = 0, mapped = keep ? s->nmapped : 0;
    if (!keep) {
        m[count] = (sb_msg){.op = OP_UNMAP, .seq = ++s->seq};
        fds[count++] = -1;
        s->nmapped = 0;
    }
    for (uint32_t i = 0; i < n; i++) {
        if (!bufs[i] || slot_in(s, sh[i].serial) >= 0) continue;
        int again = 0;   /* the same buffer twice in these calls: mapped once */
        for (uint32_t j = 0; j < i && !again; j++) again = bufs[j] && sh[j].serial == sh[i].serial;
        if (again) continue;
        if (mapped == MAX_SLOTS) {
            char why[80];
            snprintf(why, sizeof why, "more than %d buffers for one sandbox", MAX_SLOTS);
            crashed(s, r, why);
            goto out;
        }
        m[count] = (sb_msg){.op = OP_MAP, .seq = ++s->seq, .bytes = sh[i].bytes, .data_offset = sh[i].data_offset};
        fds[count++] = sh[i].fd;
        s->mapped[mapped++] = sh[i].serial;
    }
    if (count) {
        m[count - 1].slot = 1;   /* the last is answered */
        if (send_all(s->chan, m, fds, count)) { end(s, r); goto out; }
        sb_msg got;
        double c0 = s->cpu_end, cpu;
        if (await(s, s->seq, OP_MAPPED, c0, 60, &got, r, NULL) || settle(s, c0, 60, &cpu, r)) goto out;
        s->cpu_end = cpu;
        if (got.nargs != mapped) { crashed(s, r, "the sandbox lost count of its buffers"); goto out; }
        s->nmapped = mapped;
    }
    for (uint32_t i = 0; i < n; i++) slot[i] = bufs[i] ? (int32_t)slot_in(s, sh[i].serial) : -1;
    rc = 0;
out:
    free(sh);
    free(m);
    free(fds);
    free(want);
    return rc;
}

int kwb_sandbox_calls(kwb_sandbox *s, uint32_t count, const kwb_value *args, kwb_buffer *const *bufs,
                      double limit_s, kwb_sandbox_result *r) {
    *r = (kwb_sandbox_result){.outcome = KWB_SANDBOX_OK};
    if (count == 0 || count > 64) return kwb_fail(KWB_EINVAL, "a sandbox takes 1 to 64 calls at once, not %u", count);
    if (!s->alive) {
        r->outcome = KWB_SANDBOX_CRASHED;
        snprintf(r->detail, sizeof r->detail, "the sandbox ended earlier");
        return 0;
    }
    size_t total = (size_t)count * s->nargs;
    sb_msg *m = calloc(count, sizeof *m);
    kwb_buffer **ptrs = calloc(total ? total : 1, sizeof *ptrs);
    int32_t *slot = calloc(total ? total : 1, sizeof *slot);
    if (!m || !ptrs || !slot) { free(m); free(ptrs); free(slot); return kwb_fail(KWB_ENOMEM, "out of memory"); }
    for (size_t k = 0; k < total; k++)
        if (bufs && s->args[k % s->nargs] == KWB_C_PTR) ptrs[k] = bufs[k];
    int ended = map_calls(s, (uint32_t)total, ptrs, slot, r);
    free(ptrs);
    if (ended) { free(m); free(slot); return 0; }
    for (uint32_t j = 0; j < count; j++) {
        m[j].op = OP_CALL;
        m[j].nargs = s->nargs;
        for (uint32_t i = 0; i < s->nargs; i++) {
            size_t k = (size_t)j * s->nargs + i;
            m[j].args[i] = args[k];
            m[j].bufslot[i] = -1;
            if (s->args[i] == KWB_C_PTR) {
                m[j].args[i].u64 = 0;   /* no address of the judge's reaches the sandbox */
                m[j].bufslot[i] = slot[k];
            }
        }
    }
    free(slot);
    unsigned long v = 0;
    char st = proc_state(s, &v);
    double c0 = cpu_now(s), c1;
    if (st != 'S' || v != s->nvcsw) {   /* awake with nothing to do: it ran between calls */
        if (settle(s, s->cpu_end, limit_s, &c1, r)) { free(m); return 0; }
        c0 = c1;
    }
    r->between_s = c0 - s->cpu_end;
    /* all the calls queued at once: the sandbox runs them back to back,
     * asleep only after the last */
    double t0 = kwb_now(), limit = limit_s * count;
    for (uint32_t j = 0; j < count; j++) {
        m[j].seq = ++s->seq;
        m[j].slot = j + 1 == count;   /* answer the last one */
    }
    if (send_all(s->chan, m, NULL, count)) { free(m); end(s, r); return 0; }
    sb_msg done;
    int failed = await(s, s->seq, OP_DONE, c0, limit, &done, r, NULL) || settle(s, c0, limit, &c1, r);
    free(m);
    r->wall_s = kwb_now() - t0;
    if (failed) return 0;
    r->cpu_s = c1 - c0;
    r->ret = done.ret;
    s->cpu_end = c1;
    return 0;
}

int kwb_sandbox_call(kwb_sandbox *s, const kwb_value *args, kwb_buffer *const *bufs, double limit_s,
                     kwb_sandbox_result *r) {
    return kwb_sandbox_calls(s, 1, args, bufs, limit_s, r);
}

int kwb_sandbox_pid(const kwb_sandbox *s) { return s->alive ? (int)s->pid : 0; }

void kwb_sandbox_free(kwb_sandbox *s) {
    if (!s) return;
    end(s, NULL);
    if (s->pinned) sched_setaffinity(0, sizeof s->judge_cpus, &s->judge_cpus);
    if (s->chan >= 0) close(s->chan);
    if (s->status_fd >= 0) close(s->status_fd);
    free(s->mapped);
    free(s);
}
