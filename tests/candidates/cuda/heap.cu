// heap.cu: a block of the device heap as a memory across calls: freed at the
// end of one call, the allocator hands the same block to the next, which
// reads what the last one left -> forbidden (ptx-allow-list: call malloc).
extern "C" __global__ void vecadd(int n, const float *a, const float *b, float *c) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float *seen = (float *)malloc(sizeof(float));
    c[i] = a[i] + b[i] + 0.0f * seen[0];
    seen[0] = c[i];
    free(seen);
}
