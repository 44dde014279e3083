// vecadd.cu: c = a + b, tunable in the style of the classic auto-tuner
// example. BLOCK threads per block; each thread adds VEC adjacent elements
// (one float2 or float4 access when VEC is 2 or 4) ITEMS times, a block's
// worth apart, so a grid of ceil(n / (BLOCK * VEC * ITEMS)) blocks covers n.
// The start kernel is BLOCK = 64, VEC = 1, ITEMS = 1: one element per thread.
#ifndef BLOCK
#define BLOCK 64
#endif
#ifndef VEC
#define VEC 1
#endif
#ifndef ITEMS
#define ITEMS 1
#endif

template <int V> struct vec_of;
template <> struct vec_of<1> { typedef float type; };
template <> struct vec_of<2> { typedef float2 type; };
template <> struct vec_of<4> { typedef float4 type; };

__device__ __forceinline__ float add1(float x, float y) { return x + y; }
__device__ __forceinline__ float2 add1(float2 x, float2 y) { return make_float2(x.x + y.x, x.y + y.y); }
__device__ __forceinline__ float4 add1(float4 x, float4 y) {
    return make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
}

extern "C" __global__ void __launch_bounds__(BLOCK)
vecadd(int n, const float *__restrict__ a, const float *__restrict__ b, float *__restrict__ c) {
    typedef typename vec_of<VEC>::type V;
    long long base = (long long)blockIdx.x * BLOCK * VEC * ITEMS;
#pragma unroll
    for (int it = 0; it < ITEMS; it++) {
        long long i = base + ((long long)it * BLOCK + threadIdx.x) * VEC;
        if (i + VEC <= n) {
            *(V *)(c + i) = add1(*(const V *)(a + i), *(const V *)(b + i));
        } else {
            for (long long j = i; j < n; j++) c[j] = a[j] + b[j];
        }
    }
}
