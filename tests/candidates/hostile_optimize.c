/* hostile_optimize.c: keeps state only where __OPTIMIZE__ is defined. The
 * build always optimises (-O2), so with a recipe's flags = {} a rule view
 * made without the build's own command would not see the counter ->
 * forbidden (global-state) at line 7. */
#ifdef __OPTIMIZE__
#define COUNT 1
static int calls;
#endif

void matmul(int n, const float *a, const float *b, float *c) {
#ifdef COUNT
    calls++;
#endif
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0;
            for (int k = 0; k < n; k++) acc += a[i * n + k] * b[k * n + j];
            c[i * n + j] = acc;
        }
}
