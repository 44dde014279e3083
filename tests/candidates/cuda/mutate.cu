// mutate.cu: right answer, then it overwrites an input -> wrong (input checksum).
extern "C" __global__ void vecadd(int n, const float *a, const float *b, float *c) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        c[i] = a[i] + b[i];
        ((float *)a)[i] = 0.0f;
    }
}
