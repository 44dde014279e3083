// smem_barrier.cu: the same exchange through shared memory as smem_race.cu,
// with the barrier it needs -> slower or accepted, and clean under every
// sanitizer.
extern "C" __global__ void vecadd(int n, const float *a, const float *b, float *c) {
    __shared__ float s[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? a[i] + b[i] : 0.0f;
    s[threadIdx.x] = v;
    __syncthreads();
    float w = s[(threadIdx.x + 32) & 255];
    if (i < n) c[i] = v + (w == 1234.5f ? 1.0f : 0.0f);
}
