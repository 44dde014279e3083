/* iso_output.c: writes 1 GiB to stdout on its first call, then answers
 * right -> output capped, judged on its results. */
#define _GNU_SOURCE
#include <string.h>
#include <unistd.h>
static int said;
void matmul(int n, const float *a, const float *b, float *c) {
    if (!said) {
        static char chunk[1 << 20];
        memset(chunk, 'x', sizeof chunk);
        for (int i = 0; i < 1024; i++)
            for (size_t off = 0; off < sizeof chunk;) {
                ssize_t w = write(1, chunk + off, sizeof chunk - off);
                if (w <= 0) break;
                off += (size_t)w;
            }
        said = 1;
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0;
            for (int k = 0; k < n; k++) acc += a[i * n + k] * b[k * n + j];
            c[i * n + j] = acc;
        }
}
