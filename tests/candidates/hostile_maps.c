/* hostile_maps.c: reads /proc/self/maps to find the harness's memory (the
 * first step of pointing the reference at its own output) -> forbidden by
 * the allow-list (fopen is none of the functions a host kernel may call). */
#include <stdio.h>

void matmul(int n, const float *a, const float *b, float *c) {
    FILE *f = fopen("/proc/self/maps", "r");
    if (f) fclose(f);
    for (int i = 0; i < n * n; i++) c[i] = 0.0f;
    (void)a; (void)b;
}
