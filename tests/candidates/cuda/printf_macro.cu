// printf_macro.cu: device printf behind a macro -> forbidden (printf: vprintf in the PTX).
#define SAY pri##ntf
extern "C" __global__ void vecadd(int n, const float *a, const float *b, float *c) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i == 0) SAY("%d\n", n);
    if (i < n) c[i] = a[i] + b[i];
}
