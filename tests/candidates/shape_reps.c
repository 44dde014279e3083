/* shape_reps.c: the naive matmul done SMALL_REPS times at n = 48 and
 * LARGE_REPS times at n = 96, so that a candidate can be made tenfold faster
 * or slower at one shape than another (tests/recipes/elsewhere.lua). */
#ifndef SMALL_REPS
#define SMALL_REPS 10
#endif
#ifndef LARGE_REPS
#define LARGE_REPS 10
#endif
void matmul(int n, const float *a, const float *b, float *c) {
    int reps = n <= 48 ? SMALL_REPS : LARGE_REPS;
    for (int r = 0; r < reps; r++)   /* c may alias a or b: every pass is done */
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++) {
                float acc = 0;
                for (int k = 0; k < n; k++) acc += a[i * n + k] * b[k * n + j];
                c[i * n + j] = acc;
            }
}
