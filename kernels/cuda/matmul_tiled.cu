// matmul_tiled.cu: C = alpha * A * B + beta * C (row-major, fp32), a tunable
// shared-memory tiled SGEMM. Each block computes a BM x BN tile of C, stepping
// through K in slices of BK; each thread owns a TM x TN micro-tile held in
// registers. Tunables come in as defines; the defaults suit sm_80 and later.
//
//   grid  = (ceil(N / BN), ceil(M / BM)), block = (BN / TN) * (BM / TM) threads
#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 128
#endif
#ifndef BK
#define BK 16
#endif
#ifndef TM
#define TM 8
#endif
#ifndef TN
#define TN 8
#endif
#ifndef PAD
#define PAD 4
#endif

#define NTHREADS ((BM / TM) * (BN / TN))

extern "C" __global__ void __launch_bounds__(NTHREADS)
sgemm_tiled(int M, int N, int K, float alpha, const float *__restrict__ A,
            const float *__restrict__ B, float beta, float *__restrict__ C)
{
    // A is stored transposed in shared memory so the inner loop reads it
    // with unit stride; PAD columns keep the transposed stores off one bank.
    __shared__ float As[BK][BM + PAD];
    __shared__ float Bs[BK][BN + PAD];

    const int tid = threadIdx.x;
    const int block_row = blockIdx.y * BM;
    const int block_col = blockIdx.x * BN;
    const int thread_row = (tid / (BN / TN)) * TM;
    const int thread_col = (tid % (BN / TN)) * TN;

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j)
            acc[i][j] = 0.0f;

    float a_frag[TM];
    float b_frag[TN];

    for (int k0 = 0; k0 < K; k0 += BK) {
        // Cooperative loads of the A and B slices, bounds-checked so that
        // any M, N and K work; out-of-range elements load as zero.
        for (int idx = tid; idx < BM * BK; idx += NTHREADS) {
            const int r = idx / BK, c = idx % BK;
            const int gr = block_row + r, gc = k0 + c;
            As[c][r] = (gr < M && gc < K) ? A[(size_t)gr * K + gc] : 0.0f;
        }
        for (int idx = tid; idx < BK * BN; idx += NTHREADS) {
            const int r = idx / BN, c = idx % BN;
            const int gr = k0 + r, gc = block_col + c;
            Bs[r][c] = (gr < K && gc < N) ? B[(size_t)gr * N + gc] : 0.0f;
        }
        __syncthreads();

#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
#pragma unroll
            for (int i = 0; i < TM; ++i)
                a_frag[i] = As[kk][thread_row + i];
#pragma unroll
            for (int j = 0; j < TN; ++j)
                b_frag[j] = Bs[kk][thread_col + j];
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j)
                    acc[i][j] = fmaf(a_frag[i], b_frag[j], acc[i][j]);
        }
        __syncthreads();
    }

    // Epilogue: scale and write back the micro-tile, guarding the edges.
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int gr = block_row + thread_row + i;
        if (gr >= M)
            continue;
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int gc = block_col + thread_col + j;
            if (gc >= N)
                continue;
            float *out = &C[(size_t)gr * N + gc];
            *out = beta == 0.0f ? alpha * acc[i][j] : alpha * acc[i][j] + beta * *out;
        }
    }
}
