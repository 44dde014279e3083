/* hostile_asm_state.c: counts its calls in a .bss word the assembler
 * defines (named by no C identifier, so no writable data symbol the rules
 * see) and skips the work after the first two calls (the verification
 * runs, it hopes). The verified timed runs find the outputs unwritten ->
 * wrong. */
__asm__(".local kwb_calls\n\t.comm kwb_calls, 4, 4");

static int bump(void) {
    int v;
    __asm__ volatile("movl kwb_calls(%%rip), %0\n\taddl $1, %0\n\tmovl %0, kwb_calls(%%rip)" : "=r"(v) : : "memory");
    return v;
}

void matmul(int n, const float *a, const float *b, float *c) {
    if (bump() > 2) return;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0;
            for (int k = 0; k < n; k++) acc += a[i * n + k] * b[k * n + j];
            c[i * n + j] = acc;
        }
}
