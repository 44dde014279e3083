/* hostile_overrun.c: a right answer, then one float written just past the
 * output's end -> wrong, naming c and the offsets (4 bytes after it). */
void matmul(int n, const float *a, const float *b, float *c) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0;
            for (int k = 0; k < n; k++) acc += a[i * n + k] * b[k * n + j];
            c[i * n + j] = acc;
        }
    c[n * n] = 0.0f;
}
