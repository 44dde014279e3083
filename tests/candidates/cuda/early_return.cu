// early_return.cu: if its element of c already holds a number (not the
// harness's NaN poison) it returns: the verification runs see a right answer,
// the timed runs only read c -> impossible (under the physical floor).
extern "C" __global__ void vecadd(int n, const float *a, const float *b, float *c) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float old = c[i];
    if (old == old) return;
    c[i] = a[i] + b[i];
}
