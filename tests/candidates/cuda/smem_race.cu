// smem_race.cu: each thread reads another warp's shared-memory slot with no
// barrier between the write and the read; the value read never changes the
// result, so every check of values passes -> unsafe (racecheck).
extern "C" __global__ void vecadd(int n, const float *a, const float *b, float *c) {
    __shared__ float s[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? a[i] + b[i] : 0.0f;
    s[threadIdx.x] = v;
    float w = s[(threadIdx.x + 32) & 255];
    if (i < n) c[i] = v + (w == 1234.5f ? 1.0f : 0.0f);
}
