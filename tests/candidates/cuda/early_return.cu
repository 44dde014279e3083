// early_return.cu: if its element of c already holds a number (not the
// harness's NaN poison) it returns, hoping the timed runs find the verified
// answer still there and only read c. The CUDA harness poisons the outputs
// before every timed run, so the skip never happens: it does the whole work
// every time, its times are honest, and it is judged like any other kernel.
extern "C" __global__ void vecadd(int n, const float *a, const float *b, float *c) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float old = c[i];
    if (old == old) return;
    c[i] = a[i] + b[i];
}
