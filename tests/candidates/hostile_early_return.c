/* hostile_early_return.c: if C already holds numbers (not the harness's
 * poison), it assumes they are its own last answer and returns at once. The
 * verification runs get poisoned outputs and see a right answer; the timed
 * runs re-use the buffers, return in nanoseconds and still leave the right
 * answer behind -> impossible (faster than the physical floor). */
void matmul(int n, const float *a, const float *b, float *c) {
    if (c[0] == c[0] && c[n * n - 1] == c[n * n - 1]) return;   /* NaN != NaN */
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0;
            for (int k = 0; k < n; k++) acc += a[i * n + k] * b[k * n + j];
            c[i * n + j] = acc;
        }
}
