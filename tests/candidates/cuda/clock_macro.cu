// clock_macro.cu: the same clock read, its name pasted by a macro -> forbidden
// (timer, found in the PTX as %clock64).
#define READ(x) clock##x
extern "C" __global__ void vecadd(int n, const float *a, const float *b, float *c) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    long long t = READ(64)();
    if (i < n) c[i] = a[i] + b[i] + (t < 0 ? 1.0f : 0.0f);
}
