// float4_tail.cu: a grid-stride loop over float4 and a scalar loop over the
// tail (n need not be a multiple of 4) -> slower or accepted, and clean
// under every sanitizer.
extern "C" __global__ void vecadd(int n, const float *a, const float *b, float *c) {
    long long stride = (long long)gridDim.x * blockDim.x, t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long n4 = n / 4;
    for (long long j = t; j < n4; j += stride) {
        float4 x = ((const float4 *)a)[j], y = ((const float4 *)b)[j];
        ((float4 *)c)[j] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
    }
    for (long long i = 4 * n4 + t; i < n; i += stride) c[i] = a[i] + b[i];
}
