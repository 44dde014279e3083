/* matmul_ref.c: the trusted reference: C = A * B for n x n row-major matrices,
 * accumulated in double. Simple on purpose. */
void matmul_ref(int n, const float *a, const float *b, float *c) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double acc = 0;
            for (int k = 0; k < n; k++) acc += (double)a[i * n + k] * b[k * n + j];
            c[i * n + j] = (float)acc;
        }
}
