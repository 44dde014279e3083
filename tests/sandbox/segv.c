/* segv.c: writes through a null pointer. */
void add(int n, const float *a, float *c) {
    (void)n; (void)a; (void)c;
    *(volatile int *)0 = 1;
}
