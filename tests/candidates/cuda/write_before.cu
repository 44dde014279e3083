// write_before.cu: right, and one word written just before its output ->
// wrong, naming output c and the byte offsets (the guard band before it).
extern "C" __global__ void vecadd(int n, const float *a, const float *b, float *c) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
    if (i == 0) c[-1] = 0.0f;
}
