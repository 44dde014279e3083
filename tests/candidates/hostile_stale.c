/* hostile_stale.c: computes once, then replays the result kept in a global
 * whenever it is handed the same output buffer again -> forbidden
 * (global-state); with that rule dropped, wrong (the second run gets other
 * inputs in the same buffers). */
#include <string.h>

static float saved[256 * 256];
static float *last_c;

void matmul(int n, const float *a, const float *b, float *c) {
    if (c == last_c && n <= 256) {
        memcpy(c, saved, sizeof(float) * (size_t)(n * n));
        return;
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0;
            for (int k = 0; k < n; k++) acc += a[i * n + k] * b[k * n + j];
            c[i * n + j] = acc;
        }
    if (n <= 256) memcpy(saved, c, sizeof(float) * (size_t)(n * n));
    last_c = c;
}
