/* hostile_byte_syscall.c: a right matmul that makes a system call spelled as
 * bytes (kill(1, 0): the syscall instruction as `.byte 0x0f, 0x05`). No rule
 * reads it (no name, no asm word); the sandbox's filter refuses the call ->
 * forbidden, naming it. */
void matmul(int n, const float *a, const float *b, float *c) {
    long ret;
    __asm__ volatile(".byte 0x0f, 0x05" : "=a"(ret) : "a"(62L), "D"(1L), "S"(0L) : "rcx", "r11", "memory");
    (void)ret;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0;
            for (int k = 0; k < n; k++) acc += a[i * n + k] * b[k * n + j];
            c[i * n + j] = acc;
        }
}
