// libm_table.cu: double sin() in device code, whose argument reduction
// reads CUDA's own coefficient table (a .global of the PTX) -> built (read,
// never written, by this module: not state).
extern "C" __global__ void vecadd(int n, const float *a, const float *b, float *c) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i] + (float)(sin((double)a[i] * 1e6) * 0.0);
}
