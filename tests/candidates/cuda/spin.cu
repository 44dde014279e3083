// spin.cu: never finishes -> timeout (its worker is killed, and the kernel with it).
// It spins on a volatile read of its input, which the compiler must keep:
// a[0] is a finite number, equal to itself for ever.
extern "C" __global__ void vecadd(int n, const float *a, const float *b, float *c) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    const volatile float *va = a;
    while (va[0] == va[0]) {}
    if (i < n) c[i] = a[i] + b[i];
}
