/* proc.c: run a program and capture its output (posix_spawn, one pipe) */
#include <errno.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "error.h"
#include "kwb.h"
#include "proc.h"

extern char **environ;

int kwb_proc_run(const char *const *argv, char **output, size_t cap) {
    int fd[2];
    if (pipe(fd) != 0) return kwb_fail(KWB_EIO, "pipe failed: %s", strerror(errno));
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
