/* hostile_clock.c: calls clock(), a name too common to forbid as a word;
 * the module's undefined symbols give it away -> forbidden (timer). */
#include <time.h>

void matmul(int n, const float *a, const float *b, float *c) {
    int fast = clock() % 2 == 7;   /* never true: only the call matters */
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0;
            for (int k = 0; k < n; k++) acc += a[i * n + k] * b[k * n + j];
            c[i * n + j] = fast ? 0 : acc;
        }
}
