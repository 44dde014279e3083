/* honest_libm.c: an honest control: scratch from malloc, memcpy and libm
 * (sqrtf of a square) on the way to a right answer -> verified. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

void matmul(int n, const float *a, const float *b, float *c) {
    float *row = malloc(sizeof(float) * n);
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < n; j++) {
            float acc = 0;
            for (int k = 0; k < n; k++) acc += a[i * n + k] * b[k * n + j];
            row[j] = copysignf(sqrtf(acc * acc), acc);
        }
        memcpy(c + i * n, row, sizeof(float) * n);
    }
    free(row);
}
