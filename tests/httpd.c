/* httpd: a scripted HTTP/1.1 server that stands in for model APIs in tests.
 *
 *   httpd SCRIPT LOG PORTFILE
 *
 * It listens on 127.0.0.1 at a port the kernel picks and writes that port and
 * a newline to PORTFILE (through PORTFILE.tmp and a rename, so a reader never
 * sees half of it). The n-th connection accepted gets the n-th script entry
 * and a child process of its own, which reads one request (headers, then
 * Content-Length bytes of body), appends one line
 *   {"n": N, "method": "...", "path": "...", "headers": {...}, "body": "..."}
 * to LOG (header names lowercased, values trimmed, the last of a repeated
 * header wins), sends the entry's response with Content-Length and
 * "Connection: close" added, and closes. Once the script has run out, each
 * request is logged and answered 500 {"error":"httpd: script exhausted"}.
 * A malformed, chunked or over-4-MiB request gets a 400 and no log line.
 * The server exits 0 when its stdin reaches EOF or after 60 s without a
 * connection; bad usage or an unreadable or malformed script exit 2.
 *
 * Script format:
 *   # comments (only before the first entry)
 *   === STATUS [delay=SECONDS] [drop=BYTES]
 *   Name: value        response headers, up to the first empty line
 *
 *   body               every line up to the next line starting with "==="
 *   ...                or end of file, joined by "\n", without the newline
 *                      that ends the last line (a body may be empty)
 * delay= sleeps that long (fractions allowed) after reading the request and
 * before replying; drop= announces the full body's length but sends only its
 * first BYTES bytes, then closes. Lines may end in "\r\n". Bodies may be up
 * to 1 MiB, the script up to 4 MiB, a request up to 4 MiB. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_SCRIPT (4 << 20)
#define MAX_BODY (1 << 20)
#define MAX_REQUEST (4 << 20)
#define MAX_HEADERS 256
#define IDLE_SECONDS 60
#define IO_SECONDS 30 /* a child gives up on a client this slow */

struct buf {
    char *p;
    size_t len, cap;
};

struct entry {
    int status;
    double delay;
    long drop;       /* body bytes to send, or -1 for all */
    struct buf head; /* "Name: value\r\n" lines */
    struct buf body;
};

struct request {
    char *method, *path, *body;
    size_t body_len, nheaders;
    char *name[MAX_HEADERS], *value[MAX_HEADERS];
};

static struct entry *entries;
static size_t nentries;

static void die(int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("httpd: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(code);
}

/* Append n bytes to b, keeping it NUL-terminated. */
static void buf_add(struct buf *b, const void *data, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) die(1, "out of memory");
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, data, n);
    b->len += n;
    b->p[b->len] = 0;
}

static void buf_str(struct buf *b, const char *s) { buf_add(b, s, strlen(s)); }

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Parse the words after "===": STATUS [delay=SECONDS] [drop=BYTES]. */
static int parse_entry_line(char *s, struct entry *e) {
    char *save, *end, *word = strtok_r(s, " \t", &save);
    if (!word) return -1;
    long status = strtol(word, &end, 10);
    if (*end || status < 100 || status > 999) return -1;
    e->status = (int)status;
    e->drop = -1;
    while ((word = strtok_r(NULL, " \t", &save))) {
        if (!strncmp(word, "delay=", 6)) {
            e->delay = strtod(word + 6, &end);
            if (end == word + 6 || *end || !(e->delay >= 0 && e->delay <= 3600)) return -1;
        } else if (!strncmp(word, "drop=", 5)) {
            e->drop = strtol(word + 5, &end, 10);
            if (end == word + 5 || *end || e->drop < 0) return -1;
        } else {
            return -1;
        }
    }
    return 0;
}

static void parse_script(const char *path) {
    static char text[MAX_SCRIPT + 1];
    size_t len = 0, lineno = 0, body_lines = 0;
    FILE *f = fopen(path, "rb");
    if (f) len = fread(text, 1, sizeof text, f);
    if (!f || ferror(f) || len > MAX_SCRIPT) die(2, "cannot read script %s (or it is over 4 MiB)", path);
    fclose(f);
    int in_body = 0;
    for (char *p = text, *end = text + len; p < end;) {
        char *line = p, *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        p = nl ? nl + 1 : end;
        lineno++;
        if (n && line[n - 1] == '\r') n--;
        struct entry *e = nentries ? &entries[nentries - 1] : NULL;
        if (n >= 3 && !memcmp(line, "===", 3)) { /* a new entry */
            char words[256];
            if (n - 3 >= sizeof words) die(2, "%s:%zu: entry line too long", path, lineno);
            memcpy(words, line + 3, n - 3);
            words[n - 3] = 0;
            entries = realloc(entries, (nentries + 1) * sizeof *entries);
            if (!entries) die(1, "out of memory");
            e = memset(&entries[nentries++], 0, sizeof *entries);
            if (parse_entry_line(words, e))
                die(2, "%s:%zu: want '=== STATUS [delay=SECONDS] [drop=BYTES]'", path, lineno);
            buf_add(&e->head, "", 0);
            buf_add(&e->body, "", 0);
            in_body = 0;
            body_lines = 0;
        } else if (!e) { /* before the first entry */
            if (n && line[0] != '#') die(2, "%s:%zu: text before the first '===' line", path, lineno);
        } else if (!in_body) { /* a header, or the empty line that ends them */
            char *colon = memchr(line, ':', n);
            if (!n) {
                in_body = 1;
            } else if (!colon || colon == line) {
                die(2, "%s:%zu: want 'Name: value' or an empty line", path, lineno);
            } else {
                buf_add(&e->head, line, n);
                buf_str(&e->head, "\r\n");
            }
        } else { /* a body line */
            if (body_lines++) buf_str(&e->body, "\n");
            buf_add(&e->body, line, n);
            if (e->body.len > MAX_BODY) die(2, "%s:%zu: body over 1 MiB", path, lineno);
        }
    }
}

static int write_all(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Read and parse one request: 0 if good, -1 if the client went away, or
 * 400 for a bad (or chunked, or too large) request. */
static int read_request(int fd, struct request *r) {
    static char buf[MAX_REQUEST + 1];
    size_t len = 0;
    char *eoh = NULL;
    while (!eoh) {
        if (len == MAX_REQUEST) return 400;
        ssize_t got = read(fd, buf + len, MAX_REQUEST - len);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return -1;
        size_t from = len > 3 ? len - 3 : 0;
        len += (size_t)got;
        eoh = memmem(buf + from, len - from, "\r\n\r\n", 4);
    }
    *eoh = 0;
    r->body = eoh + 4;
    size_t have = len - (size_t)(r->body - buf);

    /* The request line: METHOD PATH VERSION. */
    char *save, *line = strtok_r(buf, "\r\n", &save);
    char *save2;
    r->method = line ? strtok_r(line, " ", &save2) : NULL;
    r->path = r->method ? strtok_r(NULL, " ", &save2) : NULL;
    if (!r->path || !strtok_r(NULL, " ", &save2)) return 400;

    /* Headers: lowercase the name, trim the value; the last one wins. */
    unsigned long content_length = 0;
    r->nheaders = 0;
    while ((line = strtok_r(NULL, "\r\n", &save))) {
        char *colon = strchr(line, ':');
        if (!colon || colon == line) return 400;
        *colon = 0;
        char *value = colon + 1, *vend = value + strlen(value);
        while (*value == ' ' || *value == '\t') value++;
        while (vend > value && (vend[-1] == ' ' || vend[-1] == '\t')) *--vend = 0;
        for (char *c = line; *c; c++) *c = (char)tolower((unsigned char)*c);
        size_t i = 0;
        while (i < r->nheaders && strcmp(r->name[i], line)) i++;
        if (i == MAX_HEADERS) return 400;
        if (i == r->nheaders) r->name[r->nheaders++] = line;
        r->value[i] = value;
        if (!strcmp(line, "transfer-encoding")) return 400;
        if (!strcmp(line, "content-length")) {
            char *end;
            errno = 0;
            content_length = strtoul(value, &end, 10);
            if (end == value || *end || errno || *value == '-') return 400;
        }
    }

    /* The body: exactly Content-Length bytes. */
    if (content_length > (unsigned long)(buf + MAX_REQUEST - r->body)) return 400;
    while (have < content_length) {
        ssize_t got = read(fd, r->body + have, content_length - have);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return -1;
        have += (size_t)got;
    }
    r->body_len = content_length;
    return 0;
}

/* Append s as a JSON string; bytes >= 0x80 go through as they are. */
static void json_str(struct buf *b, const char *s, size_t n) {
    buf_str(b, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[8] = {'\\', (char)c, 0};
        if (c == '\n') esc[1] = 'n';
        else if (c == '\r') esc[1] = 'r';
        else if (c == '\t') esc[1] = 't';
        else if (c < 0x20) snprintf(esc, sizeof esc, "\\u%04x", c);
        else if (c != '"' && c != '\\') esc[0] = (char)c, esc[1] = 0;
        buf_str(b, esc);
    }
    buf_str(b, "\"");
}

/* Append one JSON line for the request to the log, in a single write. */
static void log_request(int logfd, size_t n, const struct request *r) {
    struct buf b = {0};
    char num[32];
    snprintf(num, sizeof num, "{\"n\": %zu, \"method\": ", n);
    buf_str(&b, num);
    json_str(&b, r->method, strlen(r->method));
    buf_str(&b, ", \"path\": ");
    json_str(&b, r->path, strlen(r->path));
    buf_str(&b, ", \"headers\": {");
    for (size_t i = 0; i < r->nheaders; i++) {
        if (i) buf_str(&b, ", ");
        json_str(&b, r->name[i], strlen(r->name[i]));
        buf_str(&b, ": ");
        json_str(&b, r->value[i], strlen(r->value[i]));
    }
    buf_str(&b, "}, \"body\": ");
    json_str(&b, r->body, r->body_len);
    buf_str(&b, "}\n");
    if (write(logfd, b.p, b.len) != (ssize_t)b.len) fprintf(stderr, "httpd: log write failed\n");
    free(b.p);
}

static const char *reason(int status) {
    switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 429: return "Too Many Requests";
    case 500: return "Internal Server Error";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    default: return "Status";
    }
}

/* Send a response; with drop >= 0 only the body's first drop bytes. */
static void respond(int fd, int status, const char *head, const char *body, size_t len, long drop) {
    struct buf b = {0};
    char line[128];
    snprintf(line, sizeof line, "HTTP/1.1 %d %s\r\n", status, reason(status));
    buf_str(&b, line);
    buf_str(&b, head);
    snprintf(line, sizeof line, "Content-Length: %zu\r\nConnection: close\r\n\r\n", len);
    buf_str(&b, line);
    buf_add(&b, body, drop >= 0 && (size_t)drop < len ? (size_t)drop : len);
    write_all(fd, b.p, b.len);
    free(b.p);
}

static void sleep_for(double seconds) {
    struct timespec ts = {(time_t)seconds, (long)((seconds - (time_t)seconds) * 1e9)};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {}
}

/* In the child: handle one connection with script entry n (from 1). */
static void serve(int fd, size_t n, int logfd) {
    static struct request r;
    alarm(IO_SECONDS); /* SIGALRM ends a child stuck on a silent client */
    int bad = read_request(fd, &r);
    if (bad < 0) return;
    if (!bad) log_request(logfd, n, &r);
    if (bad || n > nentries) {
        const char *msg = bad ? "{\"error\":\"httpd: bad request\"}"
                              : "{\"error\":\"httpd: script exhausted\"}";
        respond(fd, bad ? bad : 500, "Content-Type: application/json\r\n", msg, strlen(msg), -1);
    } else {
        const struct entry *e = &entries[n - 1];
        alarm(0);
        sleep_for(e->delay);
        alarm(IO_SECONDS);
        respond(fd, e->status, e->head.p, e->body.p, e->body.len, e->drop);
    }
    shutdown(fd, SHUT_WR);
}

static void write_portfile(const char *path, int port) {
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) die(2, "PORTFILE name too long");
    FILE *f = fopen(tmp, "w");
    if (!f) die(1, "cannot write %s: %s", tmp, strerror(errno));
    fprintf(f, "%d\n", port);
    if (fclose(f) || rename(tmp, path)) die(1, "cannot write %s: %s", path, strerror(errno));
}

int main(int argc, char **argv) {
    if (argc != 4) die(2, "usage: httpd SCRIPT LOG PORTFILE");
    parse_script(argv[1]);
    int logfd = open(argv[2], O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (logfd < 0) die(2, "cannot open log %s: %s", argv[2], strerror(errno));
    signal(SIGPIPE, SIG_IGN);
    signal(SIGCHLD, SIG_IGN); /* children reap themselves */

    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t alen = sizeof addr;
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&addr, sizeof addr) || listen(lfd, 64) ||
        getsockname(lfd, (struct sockaddr *)&addr, &alen))
        die(1, "cannot listen: %s", strerror(errno));
    write_portfile(argv[3], ntohs(addr.sin_port));

    /* Serve until stdin ends or IDLE_SECONDS pass without a connection. */
    double deadline = now() + IDLE_SECONDS;
    size_t n = 0;
    for (;;) {
        int ms = (int)((deadline - now()) * 1000);
        if (ms <= 0) break;
        struct pollfd p[2] = {{0, POLLIN, 0}, {lfd, POLLIN, 0}};
        if (poll(p, 2, ms) < 0) {
            if (errno == EINTR) continue;
            die(1, "poll: %s", strerror(errno));
        }
        if (p[0].revents) {
            char junk[4096];
            ssize_t got = read(0, junk, sizeof junk);
            if (got == 0 || (got < 0 && errno != EINTR && errno != EAGAIN)) break;
        }
        if (p[1].revents & POLLIN) {
            int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
            if (fd < 0) continue;
            n++;
            deadline = now() + IDLE_SECONDS;
            pid_t pid = fork();
            if (pid == 0) {
                close(lfd);
                serve(fd, n, logfd);
                _exit(0);
            }
            if (pid < 0) fprintf(stderr, "httpd: fork: %s\n", strerror(errno));
            close(fd);
        }
    }
    return 0;
}
