/* iso_alloc.c: takes 100 GB, 1 GiB at a time, touching each block once
 * (only a page each is real): the address-space limit stops it first, the
 * null block it gets faults -> crashed, SIGSEGV. */
#include <stdlib.h>
void matmul(int n, const float *a, const float *b, float *c) {
    for (int i = 0; i < 100; i++) {
        volatile char *p = malloc(1ul << 30);
        p[0] = 1;
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0;
            for (int k = 0; k < n; k++) acc += a[i * n + k] * b[k * n + j];
            c[i * n + j] = acc;
        }
}
