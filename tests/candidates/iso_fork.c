/* iso_fork.c: forks until fork fails (the children wait forever), says how
 * far it got, then answers right -> judged on its results. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
static int forked;
void matmul(int n, const float *a, const float *b, float *c) {
    if (!forked) {
        forked = 1;
        int made = 0;
        for (; made < 100000; made++) {
            pid_t p = fork();
            if (p == 0) { for (;;) pause(); }
            if (p < 0) { printf("fork failed after %d: %s\n", made, strerror(errno)); break; }
        }
        if (made == 100000) printf("fork never failed\n");
        fflush(stdout);
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0;
            for (int k = 0; k < n; k++) acc += a[i * n + k] * b[k * n + j];
            c[i * n + j] = acc;
        }
}
