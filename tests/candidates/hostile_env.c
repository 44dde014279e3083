/* hostile_env.c: keeps its last output's first element in the environment,
 * state across calls with no global variable -> forbidden by the allow-list
 * (getenv is none of the functions a host kernel may call). */
#include <stdio.h>
#include <stdlib.h>

void matmul(int n, const float *a, const float *b, float *c) {
    const char *seen = getenv("KWB_HOSTILE_SEEN");
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0;
            for (int k = 0; k < n; k++) acc += a[i * n + k] * b[k * n + j];
            c[i * n + j] = acc;
        }
    if (!seen) setenv("KWB_HOSTILE_SEEN", "1", 1);
}
