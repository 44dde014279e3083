// spin.cu: never finishes -> timeout (its worker is killed, and the kernel with it).
extern "C" __global__ void vecadd(int n, const float *a, const float *b, float *c) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    volatile int forever = 1;
    while (forever) {}
    if (i < n) c[i] = a[i] + b[i];
}
