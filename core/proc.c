/* proc.c: run a program and capture its output (posix_spawn and pipes) */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "error.h"
#include "kwb.h"
#include "proc.h"

extern char **environ;

int kwb_proc_run(const char *const *argv, char **output, size_t cap) {
    int fd[2];   /* (close-on-exec: a program another thread starts meanwhile inherits neither end) */
    if (pipe2(fd, O_CLOEXEC) != 0) return kwb_fail(KWB_EIO, "pipe failed: %s", strerror(errno));
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addclose(&fa, fd[0]);
    posix_spawn_file_actions_adddup2(&fa, fd[1], 1);
    posix_spawn_file_actions_adddup2(&fa, fd[1], 2);
    posix_spawn_file_actions_addclose(&fa, fd[1]);
    pid_t pid;
    int rc = posix_spawnp(&pid, argv[0], &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fd[1]);
    if (rc != 0) {
        close(fd[0]);
        return kwb_fail(KWB_EIO, "cannot run %s: %s", argv[0], strerror(rc));
    }
    size_t len = 0, size = 4096;
    char *buf = malloc(size);
    for (;;) {
        char chunk[4096];
        ssize_t r = read(fd[0], chunk, sizeof chunk);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        size_t keep = len + (size_t)r > cap ? cap - len : (size_t)r;  /* drain the rest */
        if (buf && keep > 0) {
            if (len + keep + 1 > size) {
                while (len + keep + 1 > size) size *= 2;
                char *nb = realloc(buf, size);
                if (!nb) { free(buf); buf = NULL; }
                else buf = nb;
            }
            if (buf) { memcpy(buf + len, chunk, keep); len += keep; }
        }
    }
    close(fd[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    if (buf) buf[len] = 0;
    if (output) *output = buf;
    else free(buf);
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return WEXITSTATUS(status);
}

typedef struct { int fd; char *p; size_t len, cap, keep; } capture;

static void take(capture *c) {
    char chunk[4096];
    ssize_t r = read(c->fd, chunk, sizeof chunk);
    if (r < 0 && errno == EINTR) return;
    if (r <= 0) { close(c->fd); c->fd = -1; return; }
    size_t keep = c->len + (size_t)r > c->keep ? c->keep - c->len : (size_t)r;   /* drain the rest */
    if (keep == 0 || !c->p) return;
    if (c->len + keep + 1 > c->cap) {
        while (c->len + keep + 1 > c->cap) c->cap *= 2;
        char *np = realloc(c->p, c->cap);
        if (!np) { free(c->p); c->p = NULL; return; }
        c->p = np;
    }
    memcpy(c->p + c->len, chunk, keep);
    c->len += keep;
    c->p[c->len] = 0;
}

int kwb_proc_exec(const char *const *argv, kwb_proc_io *io) {
    int po[2], pe[2];   /* (close-on-exec, as in kwb_proc_run) */
    double t0 = kwb_now();
    if (pipe2(po, O_CLOEXEC) != 0) return kwb_fail(KWB_EIO, "pipe failed: %s", strerror(errno));
    if (pipe2(pe, O_CLOEXEC) != 0) { close(po[0]); close(po[1]); return kwb_fail(KWB_EIO, "pipe failed: %s", strerror(errno)); }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, io->input ? io->input : "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, po[1], 1);
    posix_spawn_file_actions_adddup2(&fa, pe[1], 2);
    posix_spawn_file_actions_addclose(&fa, po[0]);
    posix_spawn_file_actions_addclose(&fa, pe[0]);
    posix_spawn_file_actions_addclose(&fa, po[1]);
    posix_spawn_file_actions_addclose(&fa, pe[1]);
    posix_spawnattr_t at;
    posix_spawnattr_init(&at);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP);   /* killed as a group on timeout */
    posix_spawnattr_setpgroup(&at, 0);
    pid_t pid;
    int rc = posix_spawnp(&pid, argv[0], &fa, &at, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    close(po[1]);
    close(pe[1]);
    if (rc != 0) {
        close(po[0]);
        close(pe[0]);
        return kwb_fail(KWB_EIO, "cannot run %s: %s", argv[0], strerror(rc));
    }
    size_t cap = io->cap ? io->cap : 1 << 20;
    capture c[2] = {{po[0], malloc(4096), 0, 4096, cap}, {pe[0], malloc(4096), 0, 4096, cap}};
    for (int i = 0; i < 2; i++) if (c[i].p) c[i].p[0] = 0;
    double deadline = io->timeout > 0 ? kwb_now() + io->timeout : 0;
    io->timed_out = 0;
    while (c[0].fd >= 0 || c[1].fd >= 0) {
        struct pollfd fds[2];
        int n = 0;
        for (int i = 0; i < 2; i++)
            if (c[i].fd >= 0) fds[n++] = (struct pollfd){.fd = c[i].fd, .events = POLLIN};
        int ms = -1;
        if (deadline > 0) {
            double rest = deadline - kwb_now();
            if (rest <= 0) {
                kill(-pid, SIGKILL);
                io->timed_out = 1;
                break;
            }
            ms = (int)(rest * 1000) + 1;
        }
        if (poll(fds, (nfds_t)n, ms) < 0 && errno != EINTR) break;
        for (int i = 0, k = 0; i < 2; i++) {
            if (c[i].fd < 0) continue;
            if (fds[k++].revents) take(&c[i]);
        }
    }
    for (int i = 0; i < 2; i++) if (c[i].fd >= 0) close(c[i].fd);
    int status = 0, reaped = 0;
    while (deadline > 0 && !io->timed_out && !reaped) {   /* it may close its pipes and run on */
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid || (w < 0 && errno != EINTR)) reaped = 1;
        else if (kwb_now() >= deadline) { kill(-pid, SIGKILL); io->timed_out = 1; }
        else poll(NULL, 0, 10);
    }
    if (!reaped) while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    io->out = c[0].p;
    io->err = c[1].p;
    io->seconds = kwb_now() - t0;
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return WEXITSTATUS(status);
}

typedef struct {
    const char *const *argv;
    kwb_proc_io *io;
    int rc, started;
    pthread_t thread;
    char error[256];
} exec_job;

static void *exec_thread(void *arg) {
    exec_job *j = arg;
    j->rc = kwb_proc_exec(j->argv, j->io);
    if (j->rc < 0) snprintf(j->error, sizeof j->error, "%s", kwb_last_error());
    return NULL;
}

int kwb_proc_exec_all(int n, const char *const *const *argvs, kwb_proc_io *ios, int *rcs) {
    exec_job *jobs = calloc((size_t)n, sizeof *jobs);
    if (!jobs) return kwb_fail(KWB_ENOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        jobs[i].argv = argvs[i];
        jobs[i].io = &ios[i];
        jobs[i].started = pthread_create(&jobs[i].thread, NULL, exec_thread, &jobs[i]) == 0;
        if (!jobs[i].started) exec_thread(&jobs[i]);   /* (no thread to be had: run it here) */
    }
    int failed = -1;
    for (int i = 0; i < n; i++) {
        if (jobs[i].started) pthread_join(jobs[i].thread, NULL);
        rcs[i] = jobs[i].rc;
        if (rcs[i] < 0 && failed < 0) failed = i;
    }
    int rc = failed >= 0 ? kwb_fail(jobs[failed].rc, "%s", jobs[failed].error) : 0;
    free(jobs);
    return rc;
}
