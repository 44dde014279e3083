// const_table.cu: read-only device data, a zero and a table of ones read at
// an index computed at run time, beside a __constant__ one -> built (the
// global-state rule refuses only .global variables the module writes).
__device__ const float kZero = 0.0f;
__device__ const float kOnes[4] = {1.0f, 1.0f, 1.0f, 1.0f};
__constant__ float kScale[2] = {1.0f, 1.0f};

extern "C" __global__ void vecadd(int n, const float *a, const float *b, float *c) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = (a[i] + b[i]) * kOnes[i & 3] * kScale[i & 1] + kZero;
}
