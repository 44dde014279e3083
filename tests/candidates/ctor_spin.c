/* ctor_spin.c: a constructor that never returns (it only spins) -> timeout
 * at the recipe's limit, not a minute later. */
__attribute__((constructor)) static void spin(void) {
    for (volatile int x = 0;; x++) {}
}

void matmul(int n, const float *a, const float *b, float *c) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0;
            for (int k = 0; k < n; k++) acc += a[i * n + k] * b[k * n + j];
            c[i * n + j] = acc;
        }
}
