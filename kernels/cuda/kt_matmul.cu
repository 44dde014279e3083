// kt_matmul.cu: C = alpha * A * B + beta * C (row-major fp32), a shared-memory
// tiled SGEMM with the parameters of Kernel Tuner's matmul example space
// (recipes/kt_matmul.lua), written for kwb: a block of BSX x BSY threads
// computes a tile of (BSY * TSY) rows x (BSX * TSX) columns of C, thread
// (tx, ty) the TSY x TSX elements at rows ty + BSY * i and columns
// tx + BSX * j (so a warp's loads and stores touch consecutive columns). The
// space requires BSX == BSY * TSY: the A tile is then BSX x BSX, stepped
// through K in slices of BSX. Shared memory is static, BSX * BSX * (1 + TSX)
// floats: settings over the 48 KB a block may have statically fail to build.
// Any M, N, K: loads past the edges read zeros, stores past them are skipped.
//
//   grid = (ceil(N / (BSX * TSX)), ceil(M / (BSY * TSY))), block = (BSX, BSY)
#ifndef BSX
#define BSX 32
#endif
#ifndef BSY
#define BSY 8
#endif
#ifndef TSX
#define TSX 4
#endif
#ifndef TSY
#define TSY 4
#endif

#if BSX != BSY * TSY
#error "kt_matmul.cu needs BSX == BSY * TSY"
#endif

extern "C" __global__ void __launch_bounds__(BSX * BSY)
kt_matmul(int M, int N, int K, float alpha, const float *__restrict__ A, const float *__restrict__ B, float beta,
          float *__restrict__ C) {
    __shared__ float As[BSX][BSX];          // [row of the tile][k of the slice]
    __shared__ float Bs[BSX][BSX * TSX];    // [k of the slice][column of the tile]
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row0 = blockIdx.y * (BSY * TSY), col0 = blockIdx.x * (BSX * TSX);
    float acc[TSY][TSX];
#pragma unroll
    for (int i = 0; i < TSY; i++)
#pragma unroll
        for (int j = 0; j < TSX; j++) acc[i][j] = 0.0f;

    for (int k0 = 0; k0 < K; k0 += BSX) {
        // A: rows ty + BSY * i of the tile, k column tx; B: k rows ty + BSY * i, columns tx + BSX * j
#pragma unroll
        for (int i = 0; i < TSY; i++) {
            const int r = ty + BSY * i, gr = row0 + r, gk = k0 + tx;
            As[r][tx] = gr < M && gk < K ? A[(long long)gr * K + gk] : 0.0f;
            const int bk = k0 + r;
#pragma unroll
            for (int j = 0; j < TSX; j++) {
                const int gc = col0 + tx + BSX * j;
                Bs[r][tx + BSX * j] = bk < K && gc < N ? B[(long long)bk * N + gc] : 0.0f;
            }
        }
        __syncthreads();
#pragma unroll 8
        for (int kk = 0; kk < BSX; kk++) {
            float b[TSX];
#pragma unroll
            for (int j = 0; j < TSX; j++) b[j] = Bs[kk][tx + BSX * j];
#pragma unroll
            for (int i = 0; i < TSY; i++) {
                const float a = As[ty + BSY * i][kk];
#pragma unroll
                for (int j = 0; j < TSX; j++) acc[i][j] += a * b[j];
            }
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < TSY; i++) {
        const int gr = row0 + ty + BSY * i;
        if (gr >= M) continue;
#pragma unroll
        for (int j = 0; j < TSX; j++) {
            const int gc = col0 + tx + BSX * j;
            if (gc < N) {
                float *out = &C[(long long)gr * N + gc];
                *out = alpha * acc[i][j] + (beta != 0.0f ? beta * *out : 0.0f);
            }
        }
    }
}
