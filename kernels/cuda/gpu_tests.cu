// gpu_tests.cu: kernels the GPU tests (tests/gpu/) launch: dynamic shared
// memory above 48 KB, and thread-block clusters.

// Each block stages `words` floats through dynamic shared memory, reversed.
extern "C" __global__ void smem_reverse(const float *x, float *y, int words) {
    extern __shared__ float s[];
    const float *xb = x + (long long)blockIdx.x * words;
    float *yb = y + (long long)blockIdx.x * words;
    for (int i = threadIdx.x; i < words; i += blockDim.x) s[i] = xb[i];
    __syncthreads();
    for (int i = threadIdx.x; i < words; i += blockDim.x) yb[i] = s[words - 1 - i];
}

// Writes each block's rank inside its cluster (needs sm_90 and a cluster launch).
extern "C" __global__ void cluster_rank(int *out) {
    unsigned rank;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    if (threadIdx.x == 0) out[blockIdx.x] = (int)rank;
}

// Writes through a null pointer: the launch fails with an illegal address.
extern "C" __global__ void fault(int *p) {
    p[threadIdx.x] = 1;
}
