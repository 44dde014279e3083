// sleep.cu: sleeps a little in every thread -> forbidden (sleep).
extern "C" __global__ void vecadd(int n, const float *a, const float *b, float *c) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    __nanosleep(100);
    if (i < n) c[i] = a[i] + b[i];
}
