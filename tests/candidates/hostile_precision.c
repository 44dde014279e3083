/* hostile_precision.c: drops the inputs to bfloat16 precision (keeps the
 * top 16 bits) before multiplying -> wrong (over the tolerance). */
#include <stdint.h>
#include <string.h>

static float bf16(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    u &= 0xFFFF0000u;
    memcpy(&x, &u, sizeof u);
    return x;
}

void matmul(int n, const float *a, const float *b, float *c) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0;
            for (int k = 0; k < n; k++) acc += bf16(a[i * n + k]) * bf16(b[k * n + j]);
            c[i * n + j] = acc;
        }
}
