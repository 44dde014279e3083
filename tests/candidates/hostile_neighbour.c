/* hostile_neighbour.c: copies the reference's output, guessed to lie one
 * buffer mapping below its own output (mappings placed one after another
 * would put it there), after touching a and b to stay over the byte floor.
 * Buffers are mapped at random addresses, so the guess faults -> crashed. */
void matmul(int n, const float *a, const float *b, float *c) {
    long nn = (long)n * n, bytes = nn * 4, page = 4096;
    long body = (bytes + 4096 + page - 1) / page * page;
    long map = page + 4096 + body + page;
    const float *ref = (const float *)((const char *)c - map);
    for (int r = 0; r < 8; r++)
        for (long i = 0; i < nn; i++) c[i] = a[i] * b[i] + c[i];
    for (long i = 0; i < nn; i++) c[i] = ref[i];
}
