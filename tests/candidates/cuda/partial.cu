// partial.cu: never writes the last element -> wrong (poisoned output).
extern "C" __global__ void vecadd(int n, const float *a, const float *b, float *c) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n - 1) c[i] = a[i] + b[i];
}
