/* hostile_spin.c: burns time in a busy loop (no sleep call to forbid) before
 * a right answer -> timeout (the test recipe's timeout is 20 ms; 2e8 steps take
 * 0.08 s on a CPU that forwards the volatile store in a cycle, 0.4 s on one
 * that takes five: past the timeout, inside the worker's 1 s grace). */
void matmul(int n, const float *a, const float *b, float *c) {
    volatile unsigned long spin = 0;
    while (spin < 200000000ul) spin = spin + 1;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0;
            for (int k = 0; k < n; k++) acc += a[i * n + k] * b[k * n + j];
            c[i * n + j] = acc;
        }
}
