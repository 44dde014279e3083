// constant_table.cu: a __constant__ table read at an index computed at run
// time -> slower or accepted, and clean under every sanitizer.
__constant__ float kOne[8] = {1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f};

extern "C" __global__ void vecadd(int n, const float *a, const float *b, float *c) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = (a[i] + b[i]) * kOne[i & 7];
}
