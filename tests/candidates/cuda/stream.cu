// stream.cu: names a second stream (as a module launcher would use it)
// -> forbidden (other-streams), before anything is compiled.
// cudaStreamCreate in a comment is harmless; in code it is not:
extern "C" __global__ void vecadd(int n, const float *a, const float *b, float *c) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < 0) { cudaStream_t s; cudaStreamCreate(&s); }
    if (i < n) c[i] = a[i] + b[i];
}
