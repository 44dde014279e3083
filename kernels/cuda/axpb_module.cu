// axpb_module.cu: a whole module for nvcc: a kernel and its extern "C" host
// launcher. The harness passes the arguments (as cuLaunchKernel's
// kernelParams: args[i] points at argument i) and its stream; the launcher
// launches only on that stream and returns a CUDA error code.
#include <cuda_runtime.h>

__global__ void axpb_kernel(const float *x, float *y, float a, float b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + b;
}

extern "C" int axpb_launch(void **args, cudaStream_t stream) {
    const float *x = *(const float **)args[0];
    float *y = *(float **)args[1];
    float a = *(float *)args[2], b = *(float *)args[3];
    int n = *(int *)args[4];
    axpb_kernel<<<(n + 255) / 256, 256, 0, stream>>>(x, y, a, b, n);
    return (int)cudaGetLastError();
}
