/* spin.c: never returns. */
void add(int n, const float *a, float *c) {
    (void)n; (void)a; (void)c;
    for (volatile int x = 0;; x++) {}
}
