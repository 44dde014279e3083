// small_only.cu: right up to n = 2^20, above it it skips b -> wrong at the largest shape.
extern "C" __global__ void vecadd(int n, const float *a, const float *b, float *c) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = n <= (1 << 20) ? a[i] + b[i] : a[i];
}
