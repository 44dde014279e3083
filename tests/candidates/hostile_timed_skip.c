/* hostile_timed_skip.c: right in its first two calls (the two verification
 * runs of the recipe's one shape), then counts on not being checked again
 * and writes zeros, a hundred times faster than the product -> wrong at a
 * verified timed run. Needs a recipe without the global-state rule (its
 * counter is a global). */
static int calls;
void matmul(int n, const float *a, const float *b, float *c) {
    if (++calls > 2) {
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
