/* planted_forbidden.c: reads a clock in plain sight -> forbidden (timer). */
#define _POSIX_C_SOURCE 199309L
#include <time.h>

void matmul(int n, const float *a, const float *b, float *c) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0;
            for (int k = 0; k < n; k++) acc += a[i * n + k] * b[k * n + j];
            c[i * n + j] = acc;
        }
}
