/* hostile_mutate.c: right answer, but it zeroes an input afterwards (as if
 * it had used B as scratch) -> wrong (input checksum). */
void matmul(int n, const float *a, const float *b, float *c) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0;
            for (int k = 0; k < n; k++) acc += a[i * n + k] * b[k * n + j];
            c[i * n + j] = acc;
        }
    ((float *)b)[0] = 0;
}
