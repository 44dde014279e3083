/* planted_tenfold.c: right, but every dot product is taken ten times over
 * -> slower. */
void matmul(int n, const float *a, const float *b, float *c) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0;
            for (int r = 0; r < 10; r++)
                for (int k = 0; k < n; k++) acc += a[i * n + k] * b[k * n + j];
            c[i * n + j] = acc / 10;
        }
}
