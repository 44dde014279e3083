/* hostile_rdtsc.c: reads the time-stamp counter with inline assembly (the
 * word is inside a string literal) -> forbidden (timer, asm text). */
void matmul(int n, const float *a, const float *b, float *c) {
    unsigned lo, hi;
    __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
    (void)lo; (void)hi;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0;
            for (int k = 0; k < n; k++) acc += a[i * n + k] * b[k * n + j];
            c[i * n + j] = acc;
        }
}
