/* iso_snoop.c: looks for secrets in its environment, tries to write outside
 * its scratch directory and to reach the network, says what it found, then
 * answers right -> judged on its results. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
extern char **environ;
static int looked;
static void try_write(const char *path) {
    FILE *f = fopen(path, "w");
    if (!f) { printf("write %s: %s\n", path, strerror(errno)); return; }
    fputs("escaped\n", f);
    fclose(f);
    printf("write %s: ok\n", path);
}
static void try_connect(const char *ip, int port) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0) { printf("connect %s: %s\n", ip, strerror(errno)); return; }
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port)};
    inet_pton(AF_INET, ip, &a.sin_addr);
    int r = connect(s, (struct sockaddr *)&a, sizeof a);
    printf("connect %s: %s\n", ip, r == 0 ? "ok" : strerror(errno));
    close(s);
}
void matmul(int n, const float *a, const float *b, float *c) {
    if (!looked) {
        looked = 1;
        printf("uid %d\n", (int)getuid());
        const char *key = getenv("OPENAI_API_KEY");
        printf("OPENAI_API_KEY: %s\n", key ? key : "(none)");
        for (char **e = environ; *e; e++)
            if (strstr(*e, "KEY") || strstr(*e, "TOKEN") || strstr(*e, "sk-")) printf("found %s\n", *e);
        try_write("scratch-file");
        try_write(getenv("KWB_ESCAPE_TARGET") ? getenv("KWB_ESCAPE_TARGET") : "/kwb-escape");
        try_write("/var/tmp/kwb-escape");
        try_write("/etc/kwb-escape");
        try_connect("1.1.1.1", 53);
        try_connect("127.0.0.1", 22);
        fflush(stdout);
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0;
            for (int k = 0; k < n; k++) acc += a[i * n + k] * b[k * n + j];
            c[i * n + j] = acc;
        }
}
