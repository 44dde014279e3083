/* burn.c: burns 20 ms of its own processor time, then answers. */
#define _GNU_SOURCE
#include <time.h>
static double cpu(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}
void add(int n, const float *a, float *c) {
    double t0 = cpu();
    while (cpu() - t0 < 0.02) {}
    for (int i = 0; i < n; i++) c[i] = a[i] + 1;
}
