/* iso_spin.c: never returns -> timeout (its worker is killed). */
void matmul(int n, const float *a, const float *b, float *c) {
    volatile unsigned long spin = 0;
    for (;;) spin = spin + 1;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0;
            for (int k = 0; k < n; k++) acc += a[i * n + k] * b[k * n + j];
            c[i * n + j] = acc;
        }
}
