// clock.cu: reads the SM clock -> forbidden (timer, source).
extern "C" __global__ void vecadd(int n, const float *a, const float *b, float *c) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    long long t = clock64();
    if (i < n) c[i] = a[i] + b[i] + (t < 0 ? 1.0f : 0.0f);
}
