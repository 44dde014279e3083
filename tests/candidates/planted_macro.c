/* planted_macro.c: the same clock read, its name pasted together by a macro
 * so no plain text match sees it -> forbidden (timer, preprocessed source). */
#define _POSIX_C_SOURCE 199309L
#include <time.h>
#define READ(x) clock_##x

void matmul(int n, const float *a, const float *b, float *c) {
    struct timespec ts;
    READ(gettime)(CLOCK_MONOTONIC, &ts);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0;
            for (int k = 0; k < n; k++) acc += a[i * n + k] * b[k * n + j];
            c[i * n + j] = acc;
        }
}
