/* hostile_far.c: a right answer, then a write 8188 bytes past the output's
 * end: beyond its redzone (at least 4096 bytes), inside the guard page that
 * follows (the next 4096) -> crashed, not the run aborted. */
void matmul(int n, const float *a, const float *b, float *c) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0;
            for (int k = 0; k < n; k++) acc += a[i * n + k] * b[k * n + j];
            c[i * n + j] = acc;
        }
    c[n * n + 2047] = 0.0f;
}
