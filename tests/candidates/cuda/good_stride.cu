// good_stride.cu: a correct grid-stride vector add -> slower or accepted (never bad).
extern "C" __global__ void vecadd(int n, const float *a, const float *b, float *c) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        c[i] = a[i] + b[i];
}
