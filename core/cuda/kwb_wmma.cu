#include <mma.h>
using namespace nvcuda;
extern "C" __global__ void kwb_wmma_bf16(float *out, int iters) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> c[4];
  wmma::fill_fragment(a, __float2bfloat16(0.001f * (threadIdx.x + 1)));
  wmma::fill_fragment(b, __float2bfloat16(0.002f));
  for (int k = 0; k < 4; k++) wmma::fill_fragment(c[k], (float)(k + 1) * (threadIdx.x + 1));
  for (int i = 0; i < iters; i++) {
#pragma unroll
    for (int k = 0; k < 4; k++) wmma::mma_sync(c[k], a, b, c[k]);
  }
  if (c[0].x[0] + c[1].x[0] + c[2].x[0] + c[3].x[0] == -1.0f) wmma::store_matrix_sync(out, c[0], 16, wmma::mem_row_major);
}
