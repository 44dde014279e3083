// stale.cu: keeps its first answer in device globals and replays it when
// handed the same output again -> forbidden (global-state: a .global in the PTX).
__device__ float saved[1 << 20];
__device__ const float *last;

extern "C" __global__ void vecadd(int n, const float *a, const float *b, float *c) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    if (last == c && i < (1 << 20)) { c[i] = saved[i]; return; }
    c[i] = a[i] + b[i];
    if (i < (1 << 20)) saved[i] = c[i];
    if (i == 0) last = c;
}
