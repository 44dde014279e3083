/* hostile_underrun.c: a right answer, then 16 floats written just before
 * the output's start (64 bytes) -> wrong, naming c and the offsets. */
void matmul(int n, const float *a, const float *b, float *c) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0;
            for (int k = 0; k < n; k++) acc += a[i * n + k] * b[k * n + j];
            c[i * n + j] = acc;
        }
    for (int i = 1; i <= 16; i++) c[-i] = 1.0f;
}
