// trap.cu: an inline trap in a branch never taken -> forbidden (exit, asm text).
extern "C" __global__ void vecadd(int n, const float *a, const float *b, float *c) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (n < 0) asm volatile("trap;");
    if (i < n) c[i] = a[i] + b[i];
}
