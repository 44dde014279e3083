/* hostile_dlsym.c: looks a clock up by name at run time, so no symbol or
 * word names it -> forbidden (escape: dlsym). */
#define _GNU_SOURCE
#include <dlfcn.h>

void matmul(int n, const float *a, const float *b, float *c) {
    void *f = dlsym(RTLD_DEFAULT, "clock");
    (void)f;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0;
            for (int k = 0; k < n; k++) acc += a[i * n + k] * b[k * n + j];
            c[i * n + j] = acc;
        }
}
