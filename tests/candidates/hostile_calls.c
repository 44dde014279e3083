/* hostile_calls.c: counts its calls in a static local and skips the work
 * after the first two (the verification runs) -> forbidden (global-state). */
void matmul(int n, const float *a, const float *b, float *c) {
    static int calls;
    if (++calls > 2) return;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0;
            for (int k = 0; k < n; k++) acc += a[i * n + k] * b[k * n + j];
            c[i * n + j] = acc;
        }
}
