/* hostile_pie.c: keeps its answers in a static array only where __PIE__ is
 * not defined. Debian's cc defines __PIE__ by default and the build's -fPIC
 * removes it: a rule view made with another command than the build's would
 * not see the array -> forbidden (global-state) at line 9. */
#include <string.h>

#ifndef __PIE__
#define KEEP 1
static float saved[256 * 256];
#endif

void matmul(int n, const float *a, const float *b, float *c) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0;
            for (int k = 0; k < n; k++) acc += a[i * n + k] * b[k * n + j];
            c[i * n + j] = acc;
        }
#ifdef KEEP
    if (n <= 256) memcpy(saved, c, sizeof(float) * (size_t)(n * n));
#endif
}
