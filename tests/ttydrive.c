/* ttydrive: run a program on a pseudo-terminal and type at it.
 *
 *   ttydrive PROGRAM [ARGS...] -- STEP...
 *
 * A STEP is "send:TEXT" (escapes \r \n \t \\ \xHH; sent once the program has put
 * the terminal in non-canonical mode, as a line editor does while it reads, or
 * after 1 s if it never does), "wait:MS" (read output for
 * MS milliseconds), or "expect:TEXT" (read until TEXT has appeared in what the
 * program printed since the last send, at most 5 s).
 * At the end it reads until the program exits (at most 5 s) and prints all
 * output with carriage returns removed, then "[tty exit N]". */
#include <errno.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

static char out[1 << 20];
static size_t outlen;

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Read for up to ms milliseconds, or until `until` appears after `from`. */
static int pump(int fd, double ms, const char *until, size_t from) {
    double end = now_ms() + ms;
    for (;;) {
        if (until && strstr(out + from, until)) return 1;
        double left = end - now_ms();
        if (left <= 0) return 0;
        struct pollfd p = {fd, POLLIN, 0};
        int r = poll(&p, 1, (int)left + 1);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) continue;
        ssize_t n = read(fd, out + outlen, sizeof out - outlen - 1);
        if (n <= 0) return -1;   /* the program closed the terminal */
        char *q = out + outlen;           /* carriage returns and bells dropped */
        size_t w = 0;
        for (ssize_t k = 0; k < n; k++)
            if (q[k] != '\r' && q[k] != '\a') q[w++] = q[k];
        outlen += w;
        out[outlen] = 0;
    }
}

/* Wait (reading output meanwhile) until the terminal is in non-canonical mode,
 * so what is sent next is read by the line editor, not echoed by the kernel. */
static void await_raw(int fd) {
    double end = now_ms() + 1000;
    struct termios t;
    while (now_ms() < end && tcgetattr(fd, &t) == 0 && (t.c_lflag & ICANON)) pump(fd, 5, NULL, 0);
}

static size_t unescape(const char *s, char *d) {
    size_t n = 0;
    for (; *s; s++) {
        if (*s != '\\') { d[n++] = *s; continue; }
        s++;
        switch (*s) {
        case 'r': d[n++] = '\r'; break;
        case 'n': d[n++] = '\n'; break;
        case 't': d[n++] = '\t'; break;
        case 'x': { char hex[3] = {s[1], s[2], 0}; d[n++] = (char)strtol(hex, NULL, 16); s += 2; break; }
        case 0: s--; break;
        default: d[n++] = *s; break;
        }
    }
    return n;
}

int main(int argc, char **argv) {
    int sep = 1;
    while (sep < argc && strcmp(argv[sep], "--") != 0) sep++;
    if (sep == 1 || sep >= argc) {
        fprintf(stderr, "usage: ttydrive PROGRAM [ARGS...] -- STEP...\n");
        return 2;
    }
    argv[sep] = NULL;
    int fd;
    struct winsize ws = {.ws_row = 24, .ws_col = 120};
    pid_t pid = forkpty(&fd, NULL, NULL, &ws);
    if (pid < 0) { perror("forkpty"); return 2; }
    if (pid == 0) {
        setenv("TERM", "dumb", 1);
        execvp(argv[1], argv + 1);
        perror(argv[1]);
        _exit(127);
    }
    size_t mark = 0;   /* output position at the last send */
    for (int i = sep + 1; i < argc; i++) {
        const char *s = argv[i];
        if (strncmp(s, "send:", 5) == 0) {
            char buf[4096];
            size_t n = unescape(s + 5, buf);
            await_raw(fd);
            mark = outlen;
            if (write(fd, buf, n) != (ssize_t)n) break;
            pump(fd, 50, NULL, 0);
        } else if (strncmp(s, "wait:", 5) == 0) {
            pump(fd, atof(s + 5), NULL, 0);
        } else if (strncmp(s, "expect:", 7) == 0) {
            char buf[4096];
            buf[unescape(s + 7, buf)] = 0;
            if (pump(fd, 5000, buf, mark) != 1) fprintf(stderr, "ttydrive: never saw '%s'\n", s + 7);
        } else {
            fprintf(stderr, "ttydrive: bad step '%s'\n", s);
            return 2;
        }
    }
    double end = now_ms() + 5000;
    int status = 0, done = 0;
    while (!done && now_ms() < end) {
        if (pump(fd, 50, NULL, 0) < 0 || waitpid(pid, &status, WNOHANG) == pid) done = 1;
    }
    if (!done) { kill(pid, SIGKILL); waitpid(pid, &status, 0); }
    else if (waitpid(pid, &status, WNOHANG) == 0) waitpid(pid, &status, 0);
    fwrite(out, 1, outlen, stdout);
    printf("\n[tty exit %d]\n", WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    return 0;
}
