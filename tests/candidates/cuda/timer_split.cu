// timer_split.cu: reads %globaltimer with its name split across two string
// literals of an asm statement, so no source view holds the word -> forbidden
// (timer: the PTX holds it whole).
extern "C" __global__ void vecadd(int n, const float *a, const float *b, float *c) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned long long t;
    asm volatile("mov.u64 %0, %%global" "timer;" : "=l"(t));
    if (i < n) c[i] = a[i] + b[i] + (t == 1 ? 1.0f : 0.0f);
}
