/* hostile_partial.c: leaves the last row of C unwritten -> wrong (the
 * poisoned outputs show it). */
void matmul(int n, const float *a, const float *b, float *c) {
    for (int i = 0; i < n - 1; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0;
            for (int k = 0; k < n; k++) acc += a[i * n + k] * b[k * n + j];
            c[i * n + j] = acc;
        }
}
