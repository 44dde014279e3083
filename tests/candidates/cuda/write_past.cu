// write_past.cu: right, and one word written just past its output -> wrong,
// naming output c and the byte offsets (the guard band after it).
extern "C" __global__ void vecadd(int n, const float *a, const float *b, float *c) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
    if (i == n - 1) c[n] = 0.0f;
}
