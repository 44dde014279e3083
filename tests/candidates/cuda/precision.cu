// precision.cu: adds in half precision -> wrong (vecadd allows no error).
#include <cuda_fp16.h>
extern "C" __global__ void vecadd(int n, const float *a, const float *b, float *c) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = __half2float(__hadd(__float2half(a[i]), __float2half(b[i])));
}
