// read_slack.cu: right, and reads one word 8 KB past its output, beyond the
// guard band, in memory that is mapped but belongs to no buffer; the value
// never changes the result, so every check of values passes -> unsafe
// (memcheck: an out-of-bounds read).
extern "C" __global__ void vecadd(int n, const float *a, const float *b, float *c) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float far = i == 0 ? c[n + 2048] : 0.0f;
    if (i < n) c[i] = a[i] + b[i] + (far == 1234.5f ? 1.0f : 0.0f);
}
