/* matmul_tiled.c: C = A * B (n x n, row-major), blocked for the caches.
 * Tunable: BM x BN tiles of C, BK deep; the inner i-k-j order streams rows of
 * B and C so the compiler vectorises the j loop. UNROLL rows of B are folded
 * into each pass over a row of C, so C is loaded and stored once per UNROLL
 * multiply-adds instead of once per one. */
#ifndef BM
#define BM 64
#endif
#ifndef BN
#define BN 256
#endif
#ifndef BK
#define BK 64
#endif
#ifndef UNROLL
#define UNROLL 1
#endif

static int min_int(int a, int b) { return a < b ? a : b; }

void matmul(int n, const float *restrict a, const float *restrict b, float *restrict c) {
    for (int i = 0; i < n * n; i++) c[i] = 0;
    for (int i0 = 0; i0 < n; i0 += BM)
        for (int k0 = 0; k0 < n; k0 += BK)
            for (int j0 = 0; j0 < n; j0 += BN) {
                int i1 = min_int(i0 + BM, n), k1 = min_int(k0 + BK, n), j1 = min_int(j0 + BN, n);
                for (int i = i0; i < i1; i++) {
                    float *crow = c + i * n;
                    int k = k0;
                    for (; k + UNROLL <= k1; k += UNROLL) {
                        float av[UNROLL];
                        const float *brow[UNROLL];
                        for (int u = 0; u < UNROLL; u++) {
                            av[u] = a[i * n + k + u];
                            brow[u] = b + (k + u) * n;
                        }
                        for (int j = j0; j < j1; j++) {
                            float s = crow[j];
                            for (int u = 0; u < UNROLL; u++) s += av[u] * brow[u][j];
                            crow[j] = s;
                        }
                    }
                    for (; k < k1; k++) {
                        float aik = a[i * n + k];
                        const float *brow = b + k * n;
                        for (int j = j0; j < j1; j++) crow[j] += aik * brow[j];
                    }
                }
            }
}
