/* hostile_final_round.c: right wherever kwb's evaluation of it (two
 * verified calls at each shape, then long timings) can look, and idle in
 * two of the three timed runs of each turn of a final round. It tells the
 * round by its calls: a turn at a shape is four or five calls in a row (a
 * warm-up, three timed runs, perhaps one more after them) where an
 * evaluation begins with two. From its second turn on it writes zeros in
 * the 2nd and 3rd timed runs: the median of the three is then the idle
 * time. Where the round
 * verifies the same timed run of every turn (its place drawn once for the
 * kernel and the shape) and that is the 1st, nothing ever sees the zeros;
 * a kernel with a clock (allowed by the sandbox) finds that place in its
 * first turn from the pause the reference makes after a verified run. Its
 * counters are statics (the recipe drops the global-state rule; counters
 * in assembler-defined .bss pass it, tests/lua/test_text_rules.lua). */
static int seg_n = -1, seg_len, first_len = -1;

void matmul(int n, const float *a, const float *b, float *c) {
    if (n != seg_n) {
        if (seg_n != -1 && first_len < 0) first_len = seg_len;
        seg_n = n;
        seg_len = 0;
    }
    int turn = first_len == 4 || first_len == 5, pos = turn ? seg_len % first_len : 0;
    seg_len++;
    if (turn && (pos == 2 || pos == 3)) {
        for (int i = 0; i < n * n; i++) c[i] = 0;
        return;
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0;
            for (int k = 0; k < n; k++) acc += a[i * n + k] * b[k * n + j];
            c[i * n + j] = acc;
        }
}
