// sgemm_naive.cu: the start kernel of the GPU matmul recipe: one thread per
// element of C, TILE x TILE threads per block, straight from global memory.
#ifndef TILE
#define TILE 16
#endif

extern "C" __global__ void sgemm_tiled(int M, int N, int K, float alpha, const float *__restrict__ A,
                                       const float *__restrict__ B, float beta, float *__restrict__ C) {
    int i = blockIdx.y * TILE + threadIdx.y, j = blockIdx.x * TILE + threadIdx.x;
    if (i >= M || j >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; k++) acc += A[(size_t)i * K + k] * B[(size_t)k * N + j];
    float *out = &C[(size_t)i * N + j];
    *out = beta == 0.0f ? alpha * acc : alpha * acc + beta * *out;
}
