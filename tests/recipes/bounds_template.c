/* bounds_template.c: the i-k-j matmul with k blocked by BK, a template for
 * tests/recipes/bounds.lua (its space: BK). */
#ifndef BK
#define BK 16
#endif
void matmul(int n, const float *a, const float *b, float *c) {
    for (int x = 0; x < n * n; x++) c[x] = 0.0f;
    for (int kk = 0; kk < n; kk += BK)
        for (int i = 0; i < n; i++)
            for (int k = kk; k < kk + BK && k < n; k++)
                for (int j = 0; j < n; j++) c[i * n + j] += a[i * n + k] * b[k * n + j];
}
