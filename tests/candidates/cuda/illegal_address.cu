// illegal_address.cu: writes far outside its output -> crashed with the CUDA
// error (CUDA_ERROR_ILLEGAL_ADDRESS); its worker retires (the context is spoiled).
extern "C" __global__ void vecadd(int n, const float *a, const float *b, float *c) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i + (1L << 34) / sizeof(float)] = a[i] + b[i];
}
