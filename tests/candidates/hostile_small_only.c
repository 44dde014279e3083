/* hostile_small_only.c: right up to n = 64; above it, it samples every
 * other k and doubles -> wrong at the largest shape only. */
void matmul(int n, const float *a, const float *b, float *c) {
    int step = n > 64 ? 2 : 1;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0;
            for (int k = 0; k < n; k += step) acc += a[i * n + k] * b[k * n + j];
            c[i * n + j] = acc * (float)step;
        }
}
