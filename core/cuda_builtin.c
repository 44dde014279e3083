/* cuda_builtin.c: kwb's own device kernels (seeded fills that reproduce the
 * host's values, poison, comparison, checksums, the FMA and tensor-core rate
 * probes), compiled with NVRTC for the device on first use. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_int.h"
#include "error.h"
#include "kwb.h"

/* The counter-based generator is rng.c's, bit for bit; the conversions are
 * dtype.c's rounding (to nearest even); FMA contraction is off (--fmad=false)
 * so lo + (hi - lo) * u rounds as on the host. */
const char kwb_cuda_builtin_source[] =
    "typedef unsigned long long u64; typedef unsigned int u32; typedef unsigned short u16;\n"
    "typedef unsigned char u8; typedef long long i64;\n"
    "enum { F32, F64, F16, BF16, I8, I32, I64, U8, U32, U64, E4M3 = 64, E2M1 = 65 };\n"
    "__device__ __forceinline__ u64 mix(u64 z) {\n"
    "  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;\n"
    "  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;\n"
    "  return z ^ (z >> 31);\n"
    "}\n"
    "__device__ u64 rng_bits(u64 s, u64 i) {\n"
    "  return mix(mix(s + 0x9e3779b97f4a7c15ull) ^ (i * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull));\n"
    "}\n"
    "__device__ double rng_u01(u64 s, u64 i) { return (double)(rng_bits(s, i) >> 11) * 0x1.0p-53; }\n"
    "__device__ double rng_normal(u64 s, u64 i) {\n"
    "  double u1 = ((double)(rng_bits(s ^ 0x5851f42d4c957f2dull, 2 * i) >> 11) + 1.0) * 0x1.0p-53;\n"
    "  double u2 = rng_u01(s ^ 0x5851f42d4c957f2dull, 2 * i + 1);\n"
    "  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);\n"
    "}\n"
    /* the stream the timed runs draw from: the same distribution from one
     * hash an element and single-precision math, at the memory's pace */
    "__device__ float rng_normal_f(u64 s, u64 i) {\n"
    "  u64 r = rng_bits(s ^ 0x2545f4914f6cdd1dull, i);\n"
    "  float u1 = ((float)(u32)(r >> 40) + 1.0f) * 0x1.0p-24f, u2 = (float)(u32)((r >> 16) & 0xffffffu) * 0x1.0p-24f;\n"
    "  return sqrtf(-2.0f * __logf(u1)) * __cosf(6.2831853f * u2);\n"
    "}\n"
    "__device__ u16 to_bf16(float x) {\n"
    "  u32 u = __float_as_uint(x);\n"
    "  if ((u & 0x7fffffffu) > 0x7f800000u) return (u16)((u >> 16) | 0x0040u);\n"
    "  u += 0x7fffu + ((u >> 16) & 1u);\n"
    "  return (u16)(u >> 16);\n"
    "}\n"
    "__device__ u16 to_f16(float x) {\n"
    "  u32 u = __float_as_uint(x); u16 sign = (u16)((u >> 16) & 0x8000u); u32 a = u & 0x7fffffffu;\n"
    "  if (a > 0x7f800000u) return sign | 0x7e00u;\n"
    "  if (a >= 0x477ff000u) return sign | 0x7c00u;\n"
    "  if (a < 0x38800000u) {\n"
    "    if (a < 0x33000000u) return sign;\n"
    "    u32 e = a >> 23, m = (a & 0x7fffffu) | 0x800000u, shift = 126 - e, q = m >> shift;\n"
    "    u32 rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);\n"
    "    if (rem > half || (rem == half && (q & 1u))) q++;\n"
    "    return sign | (u16)q;\n"
    "  }\n"
    "  u32 r = a + 0xfffu + ((a >> 13) & 1u);\n"
    "  return sign | (u16)(((r >> 13) - (112u << 10)) & 0x7fffu);\n"
    "}\n"
    "__device__ float from_f16(u16 h) {\n"
    "  u32 sign = (u32)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;\n"
    "  if (e == 0x1f) return __uint_as_float(sign | 0x7f800000u | (m << 13));\n"
    "  if (e == 0) { float v = (float)m * (1.0f / 16777216.0f); return sign ? -v : v; }\n"
    "  return __uint_as_float(sign | ((e + 112u) << 23) | (m << 13));\n"
    "}\n"
    /* e4m3 (OCP FP8): bias 7, no infinities, S.1111.111 is NaN, saturating at 448 */
    "__device__ u8 to_e4m3(float x) {\n"
    "  u8 sign = signbit(x) ? 0x80 : 0; float a = fabsf(x);\n"
    "  if (isnan(x)) return 0x7f;\n"
    "  if (a >= 448.0f) return sign | 0x7e;\n"
    "  if (a < 0.015625f) return sign | (u8)rintf(a * 512.0f);\n"
    "  int e; frexpf(a, &e); e -= 1;\n"
    "  float q = rintf(ldexpf(a, 3 - e));\n"
    "  if (q >= 16.0f) { q = 8.0f; e++; }\n"
    "  int code = ((e + 7) << 3) | ((int)q - 8);\n"
    "  return sign | (u8)(code > 0x7e ? 0x7e : code);\n"
    "}\n"
    "__device__ float from_e4m3(u8 v) {\n"
    "  int e = (v >> 3) & 15, m = v & 7; float r;\n"
    "  if (e == 15 && m == 7) return __uint_as_float(0x7fc00000u);\n"
    "  r = e == 0 ? ldexpf((float)m, -9) : ldexpf((float)(8 + m), e - 10);\n"
    "  return (v & 0x80) ? -r : r;\n"
    "}\n"
    /* e2m1 (OCP FP4): 0, 0.5, 1, 1.5, 2, 3, 4, 6; ties to the even code */
    "__device__ float from_e2m1(u8 v) {\n"
    "  const float mag[8] = {0.f, 0.5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f};\n"
    "  float r = mag[v & 7]; return (v & 8) ? -r : r;\n"
    "}\n"
    "__device__ u8 to_e2m1(float x) {\n"
    "  u8 sign = signbit(x) ? 8 : 0; float a = fabsf(x); int best = 0; float bd = 1e30f;\n"
    "  if (isnan(x)) return 0;\n"
    "  for (int c = 0; c < 8; c++) {\n"
    "    float d = fabsf(a - from_e2m1((u8)c));\n"
    "    if (d < bd || (d == bd && (c & 1) == 0)) { bd = d; best = c; }\n"
    "  }\n"
    "  return sign | (u8)best;\n"
    "}\n"
    "__device__ double clampd(double v, double lo, double hi) { if (isnan(v)) return 0; return v < lo ? lo : v > hi ? hi : v; }\n"
    "__device__ void store(void *p, int dt, u64 i, double v) {\n"
    "  switch (dt) {\n"
    "  case F32: ((float *)p)[i] = (float)v; break;\n"
    "  case F64: ((double *)p)[i] = v; break;\n"
    "  case F16: ((u16 *)p)[i] = to_f16((float)v); break;\n"
    "  case BF16: ((u16 *)p)[i] = to_bf16((float)v); break;\n"
    "  case I8: ((signed char *)p)[i] = (signed char)clampd(v, -128, 127); break;\n"
    "  case I32: ((int *)p)[i] = (int)clampd(v, -2147483648.0, 2147483647.0); break;\n"
    "  case I64: ((i64 *)p)[i] = (i64)clampd(v, -9223372036854775808.0, 9223372036854774784.0); break;\n"
    "  case U8: ((u8 *)p)[i] = (u8)clampd(v, 0, 255); break;\n"
    "  case U32: ((u32 *)p)[i] = (u32)clampd(v, 0, 4294967295.0); break;\n"
    "  case U64: ((u64 *)p)[i] = (u64)clampd(v, 0, 18446744073709549568.0); break;\n"
    "  case E4M3: ((u8 *)p)[i] = to_e4m3((float)v); break;\n"
    "  }\n"
    "}\n"
    "__device__ double load(const void *p, int dt, u64 i) {\n"
    "  switch (dt) {\n"
    "  case F32: return ((const float *)p)[i];\n"
    "  case F64: return ((const double *)p)[i];\n"
    "  case F16: return from_f16(((const u16 *)p)[i]);\n"
    "  case BF16: return __uint_as_float((u32)((const u16 *)p)[i] << 16);\n"
    "  case I8: return ((const signed char *)p)[i];\n"
    "  case I32: return ((const int *)p)[i];\n"
    "  case I64: return (double)((const i64 *)p)[i];\n"
    "  case U8: return ((const u8 *)p)[i];\n"
    "  case U32: return ((const u32 *)p)[i];\n"
    "  case U64: return (double)((const u64 *)p)[i];\n"
    "  case E4M3: return from_e4m3(((const u8 *)p)[i]);\n"
    "  case E2M1: { u8 b = ((const u8 *)p)[i >> 1]; return from_e2m1((i & 1) ? b >> 4 : b & 15); }\n"
    "  }\n"
    "  return 0;\n"
    "}\n"
    "__device__ int is_float(int dt) { return dt == F32 || dt == F64 || dt == F16 || dt == BF16 || dt == E4M3; }\n"
    "__device__ int is_poison(const void *p, int dt, u64 i) {\n"
    "  switch (dt) {\n"
    "  case F32: return ((const u32 *)p)[i] == 0x7fa5a5a5u;\n"
    "  case F64: return ((const u64 *)p)[i] == 0x7ff4a5a5a5a5a5a5ull;\n"
    "  case F16: return ((const u16 *)p)[i] == 0x7d5a;\n"
    "  case BF16: return ((const u16 *)p)[i] == 0x7fa5;\n"
    "  case E4M3: return ((const u8 *)p)[i] == 0x7f;\n"
    "  case E2M1: return 0;\n"
    "  case I8: case U8: return ((const u8 *)p)[i] == 0xa5;\n"
    "  case I32: case U32: return ((const u32 *)p)[i] == 0xa5a5a5a5u;\n"
    "  default: return ((const u64 *)p)[i] == 0xa5a5a5a5a5a5a5a5ull;\n"
    "  }\n"
    "}\n"
    "__device__ double gen(int mode, int flt, u64 seed, u64 i, double a, double b, double ilo, double span) {\n"
    "  if (mode == 0) { double u = rng_u01(seed, i); return flt ? a + (b - a) * u : ilo + floor(u * span); }\n"
    "  if (mode == 1) return a + b * rng_normal(seed, i);\n"
    "  if (mode == 3) return a + b * (double)rng_normal_f(seed, i);\n"
    "  return a;\n"
    "}\n"
    /* mode 0 uniform in [a, b), 1 normal (mean a, stdev b), 2 the value a, 3 normal from the fast stream */
    "extern \"C\" __global__ void kwb_fill(void *p, int dt, u64 n, u64 seed, double a, double b, int mode) {\n"
    "  u64 stride = (u64)gridDim.x * blockDim.x, t = (u64)blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  int flt = is_float(dt) || dt == E2M1;\n"
    "  double ilo = ceil(a), span = floor(b) - ceil(a) + 1;\n"
    "  if (dt == E2M1) {\n"
    "    for (u64 j = t; j < (n + 1) / 2; j += stride) {\n"
    "      u8 lo = to_e2m1((float)gen(mode, 1, seed, 2 * j, a, b, ilo, span));\n"
    "      u8 hi = 2 * j + 1 < n ? to_e2m1((float)gen(mode, 1, seed, 2 * j + 1, a, b, ilo, span)) : 0;\n"
    "      ((u8 *)p)[j] = lo | (u8)(hi << 4);\n"
    "    }\n"
    "    return;\n"
    "  }\n"
    "  for (u64 i = t; i < n; i += stride) store(p, dt, i, gen(mode, flt, seed, i, a, b, ilo, span));\n"
    "}\n"
    "extern \"C\" __global__ void kwb_fill64(u64 *p, u64 n, u64 bits) {\n"
    "  for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) p[i] = bits;\n"
    "}\n"
    "__device__ double wsum(double v) { for (int o = 16; o; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o); return v; }\n"
    "__device__ u64 wsumu(u64 v) { for (int o = 16; o; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o); return v; }\n"
    "__device__ double wmax(double v) { for (int o = 16; o; o >>= 1) v = fmax(v, __shfl_down_sync(0xffffffffu, v, o)); return v; }\n"
    "__device__ u64 wminu(u64 v) { for (int o = 16; o; o >>= 1) { u64 w = __shfl_down_sync(0xffffffffu, v, o); v = w < v ? w : v; } return v; }\n"
    /* r: max_abs, max_rel (as bits), sum d^2, sum ref^2, nan, inf, poison, bad, first_bad, ref_nonfinite, sum ref */
    "extern \"C\" __global__ void kwb_compare(const void *out, int dto, const void *ref, int dtr, u64 n,\n"
    "                                        double atol, double rtol, u64 *r) {\n"
    "  double mabs = 0, mrel = 0, d2 = 0, r2 = 0, rs = 0; u64 nan_ = 0, inf_ = 0, poi = 0, bad = 0, rnf = 0, fb = ~0ull;\n"
    "  for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {\n"
    "    double rv = load(ref, dtr, i); int b = 0, po = is_poison(out, dto, i);\n"
    "    if (!isfinite(rv)) rnf++; else rs += rv;\n"
    "    if (po && is_float(dto)) { poi++; b = 1; }\n"
    "    else {\n"
    "      if (po) poi++;\n"
    "      double o = load(out, dto, i);\n"
    "      if (isnan(o)) { nan_++; b = 1; }\n"
    "      else if (isinf(o)) { inf_++; b = 1; }\n"
    "      else if (isfinite(rv)) {\n"
    "        double e = fabs(o - rv);\n"
    "        mabs = fmax(mabs, e);\n"
    "        if (rv != 0) mrel = fmax(mrel, e / fabs(rv));\n"
    "        d2 += e * e; r2 += rv * rv;\n"
    "        if (!(e <= atol + rtol * fabs(rv))) b = 1;\n"
    "      }\n"
    "    }\n"
    "    if (b) { bad++; if (i < fb) fb = i; }\n"
    "  }\n"
    "  mabs = wmax(mabs); mrel = wmax(mrel); d2 = wsum(d2); r2 = wsum(r2); rs = wsum(rs);\n"
    "  nan_ = wsumu(nan_); inf_ = wsumu(inf_); poi = wsumu(poi); bad = wsumu(bad); rnf = wsumu(rnf); fb = wminu(fb);\n"
    "  if ((threadIdx.x & 31) == 0) {\n"
    "    atomicMax(&r[0], (u64)__double_as_longlong(mabs)); atomicMax(&r[1], (u64)__double_as_longlong(mrel));\n"
    "    atomicAdd((double *)&r[2], d2); atomicAdd((double *)&r[3], r2);\n"
    "    atomicAdd(&r[4], nan_); atomicAdd(&r[5], inf_); atomicAdd(&r[6], poi); atomicAdd(&r[7], bad);\n"
    "    atomicMin(&r[8], fb); atomicAdd(&r[9], rnf); atomicAdd((double *)&r[10], rs);\n"
    "  }\n"
    "}\n"
    "extern \"C\" __global__ void kwb_checksum(const u8 *p, u64 bytes, u64 key, u64 *out) {\n"
    "  u64 nw = (bytes + 7) / 8, h = 0;\n"
    "  for (u64 w = (u64)blockIdx.x * blockDim.x + threadIdx.x; w < nw; w += (u64)gridDim.x * blockDim.x) {\n"
    "    u64 v = 0;\n"
    "    if (w * 8 + 8 <= bytes) v = ((const u64 *)p)[w];\n"
    "    else for (u64 k = 0; w * 8 + k < bytes; k++) v |= (u64)p[w * 8 + k] << (8 * k);\n"
    "    h += mix(v ^ (w * 0x9e3779b97f4a7c15ull + key));\n"
    "  }\n"
    "  h = wsumu(h);\n"
    "  if ((threadIdx.x & 31) == 0) atomicAdd(out, h);\n"
    "}\n"
    /* elements still poison: r[0] their count, r[1] the first */
    "extern \"C\" __global__ void kwb_poisoned(const void *p, int dt, u64 n, u64 *r) {\n"
    "  u64 c = 0, fb = ~0ull;\n"
    "  for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x)\n"
    "    if (is_poison(p, dt, i)) { c++; if (i < fb) fb = i; }\n"
    "  c = wsumu(c); fb = wminu(fb);\n"
    "  if ((threadIdx.x & 31) == 0) { atomicAdd(&r[0], c); atomicMin(&r[1], fb); }\n"
    "}\n"
    /* a buffer's guard bands, nb bytes before it and na after, as one zone
     * (index i: before, then after) of bytes drawn from the pattern: filled,
     * or checked (r[0] the first index that differs, r[1] the last) */
    "__device__ u8 zone_byte(u64 pattern, u64 i) { return (u8)(mix(pattern + (i >> 3)) >> (8 * (i & 7))); }\n"
    "extern \"C\" __global__ void kwb_guard(u8 *before, u64 nb, u8 *after, u64 na, u64 pattern, int fill, u64 *r) {\n"
    "  for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < nb + na; i += (u64)gridDim.x * blockDim.x) {\n"
    "    u8 *q = i < nb ? before + i : after + (i - nb); u8 want = zone_byte(pattern, i);\n"
    "    if (fill) *q = want;\n"
    "    else if (*q != want) { atomicMin(&r[0], i); atomicMax(&r[1], i); }\n"
    "  }\n"
    "}\n"
    /* many buffers' guard bands at once: block row y checks buffer y, its
     * zones given as z[5y..5y+4] = before, nb, after, na, pattern */
    "extern \"C\" __global__ void kwb_guards(const u64 *z, u64 *r) {\n"
    "  const u64 *d = z + 5 * blockIdx.y; u8 *before = (u8 *)d[0], *after = (u8 *)d[2]; u64 nb = d[1], na = d[3];\n"
    "  for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < nb + na; i += (u64)gridDim.x * blockDim.x) {\n"
    "    const u8 *q = i < nb ? before + i : after + (i - nb);\n"
    "    if (*q != zone_byte(d[4], i)) { atomicMin(&r[2 * blockIdx.y], i); atomicMax(&r[2 * blockIdx.y + 1], i); }\n"
    "  }\n"
    "}\n"
    /* after a call, in one launch: block rows y < ng check buffer y's guard
     * bands (z[5y..5y+4] as kwb_guards takes them); the rows after count the
     * elements of output y - ng still poison (z[5y..5y+2] = data, dtype, n;
     * r[2y] the count, r[2y+1] the first) */
    "extern \"C\" __global__ void kwb_zones(const u64 *z, u64 ng, u64 *r) {\n"
    "  const u64 *d = z + 5 * blockIdx.y; u64 y = blockIdx.y;\n"
    "  u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x, stride = (u64)gridDim.x * blockDim.x;\n"
    "  if (y < ng) {\n"
    "    u8 *before = (u8 *)d[0], *after = (u8 *)d[2]; u64 nb = d[1], na = d[3];\n"
    "    for (u64 i = t; i < nb + na; i += stride) {\n"
    "      const u8 *q = i < nb ? before + i : after + (i - nb);\n"
    "      if (*q != zone_byte(d[4], i)) { atomicMin(&r[2 * y], i); atomicMax(&r[2 * y + 1], i); }\n"
    "    }\n"
    "    return;\n"
    "  }\n"
    "  const void *p = (const void *)d[0]; int dt = (int)d[1]; u64 n = d[2], c = 0, fb = ~0ull;\n"
    "  for (u64 i = t; i < n; i += stride) if (is_poison(p, dt, i)) { c++; if (i < fb) fb = i; }\n"
    "  c = wsumu(c); fb = wminu(fb);\n"
    "  if ((threadIdx.x & 31) == 0 && c) { atomicAdd(&r[2 * y], c); atomicMin(&r[2 * y + 1], fb); }\n"
    "}\n"
    /* reads the L2 flush buffer: leaves L2 full of clean lines of it, so the
     * timed kernel pays no write-back of a flush */
    "extern \"C\" __global__ void kwb_flush_read(const u64 *p, u64 n, u64 *sink) {\n"
    "  u64 s = 0;\n"
    "  for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) s ^= p[i];\n"
    "  if (s == 0x0123456789abcdefull) *sink = s;\n"
    "}\n"
    /* 8 independent FMA chains a thread; the result is kept alive by a store
     * that never happens for real inputs */
    "extern \"C\" __global__ void kwb_fma(float *out, int iters, float seed) {\n"
    "  float a[8];\n"
    "  for (int k = 0; k < 8; k++) a[k] = seed + threadIdx.x + k;\n"
    "  for (int i = 0; i < iters; i++) {\n"
    "#pragma unroll\n"
    "    for (int k = 0; k < 8; k++) a[k] = fmaf(a[k], 0.999999f, 1e-7f);\n"
    "  }\n"
    "  float s = 0;\n"
    "  for (int k = 0; k < 8; k++) s += a[k];\n"
    "  if (s == -1.0f) out[threadIdx.x] = s;\n"
    "}\n";

/* The tensor-core probe needs the CUDA headers (mma.h), so it is a module
 * of its own, built only when cuBLAS is missing. */
const char kwb_cuda_wmma_source[] =
    "#include <mma.h>\n"
    "using namespace nvcuda;\n"
    "extern \"C\" __global__ void kwb_wmma_bf16(float *out, int iters) {\n"
    "  wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a;\n"
    "  wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> b;\n"
    "  wmma::fragment<wmma::accumulator, 16, 16, 16, float> c[4];\n"
    "  wmma::fill_fragment(a, __float2bfloat16(0.001f * (threadIdx.x + 1)));\n"
    "  wmma::fill_fragment(b, __float2bfloat16(0.002f));\n"
    /* distinct accumulators, or the compiler merges the four chains into one */
    "  for (int k = 0; k < 4; k++) wmma::fill_fragment(c[k], (float)(k + 1) * (threadIdx.x + 1));\n"
    "  for (int i = 0; i < iters; i++) {\n"
    "#pragma unroll\n"
    "    for (int k = 0; k < 4; k++) wmma::mma_sync(c[k], a, b, c[k]);\n"
    "  }\n"
    "  if (c[0].x[0] + c[1].x[0] + c[2].x[0] + c[3].x[0] == -1.0f) wmma::store_matrix_sync(out, c[0], 16, wmma::mem_row_major);\n"
    "}\n";

/* ---- the built-in module ----------------------------------------------- */

static pthread_mutex_t builtin_lock = PTHREAD_MUTEX_INITIALIZER;
static kwb_cuda_module *builtin_mod, *wmma_mod;
static char build_dir[4096] = "cache/build/cuda";

void kwb_cuda_set_build_dir(const char *dir) {
    pthread_mutex_lock(&builtin_lock);
    snprintf(build_dir, sizeof build_dir, "%s", dir);
    pthread_mutex_unlock(&builtin_lock);
}

static CUfunction get_fn(kwb_cuda_module **slot, const char *src, const char *file, const char *name) {
    kwb_cuda_ctx *c = kwb_cuda_ctx_get();
    if (!c) return NULL;
    pthread_mutex_lock(&builtin_lock);
    if (!*slot) {
        static const char *const flags[] = {"--fmad=false", NULL};
        kwb_cuda_build b = {.source = src, .name = file, .flags = flags, .build_dir = build_dir};
        char *log = NULL;
        int rc = kwb_cuda_compile(&b, slot, &log);
        if (rc) {
            char msg[1024];
            snprintf(msg, sizeof msg, "%s", kwb_last_error());
            kwb_fail(rc, "kwb's built-in kernels did not compile: %s", msg);
            free(log);
            pthread_mutex_unlock(&builtin_lock);
            return NULL;
        }
    }
    kwb_cuda_module *m = *slot;
    if (!m->cu && kwb_cu_check(c->cu->ModuleLoadData(&m->cu, m->image), "loading kwb's built-in kernels")) {
        m->cu = NULL;
        pthread_mutex_unlock(&builtin_lock);
        return NULL;
    }
    pthread_mutex_unlock(&builtin_lock);
    CUfunction f = NULL;
    if (kwb_cu_check(c->cu->ModuleGetFunction(&f, m->cu, name), name)) return NULL;
    return f;
}

CUfunction kwb_cuda_builtin(const char *name) {
    return get_fn(&builtin_mod, kwb_cuda_builtin_source, "kwb_builtin.cu", name);
}

/* Queue a built-in kernel on the harness stream. */
static int queue_builtin(const char *name, unsigned grid, unsigned block, void **args) {
    CUfunction f = kwb_cuda_builtin(name);
    if (!f) return KWB_ERUN;
    kwb_cuda_ctx *c = kwb_cuda_ctx_get();
    return kwb_cu_check(c->cu->LaunchKernel(f, grid, 1, 1, block, 1, 1, 0, c->stream, args, NULL), name);
}

/* The same, and wait for it. */
static int run_builtin(const char *name, unsigned grid, unsigned block, void **args) {
    int rc = queue_builtin(name, grid, block, args);
    return rc ? rc : kwb_cu_check(kwb_cuda_ctx_get()->cu->StreamSynchronize(kwb_cuda_ctx_get()->stream), name);
}

static unsigned grid_for(uint64_t n) {
    kwb_cuda_ctx *c = kwb_cuda_ctx_get();
    uint64_t want = (n + 255) / 256, cap = (uint64_t)(c && c->info.sms > 0 ? c->info.sms : 80) * 8;
    return (unsigned)(want < 1 ? 1 : want > cap ? cap : want);
}

static int fill(kwb_cuda_buffer *b, uint64_t seed, double a, double bb, int mode) {
    CUdeviceptr p = kwb_cuda_buffer_ptr(b);
    int dt = kwb_cuda_buffer_dtype(b);
    unsigned long long n = kwb_cuda_buffer_len(b), s = seed;
    void *args[] = {&p, &dt, &n, &s, &a, &bb, &mode};
    /* queued: whatever reads the buffer next is queued after it on the same
     * stream, or waits for the stream first (kwb_cuda_buffer_download) */
    return queue_builtin("kwb_fill", grid_for(n), 256, args);
}

int kwb_cuda_buffer_fill_uniform(kwb_cuda_buffer *b, uint64_t seed, double lo, double hi) {
    if (!(lo <= hi)) return kwb_fail(KWB_EINVAL, "uniform fill needs lo <= hi (got %g, %g)", lo, hi);
    int dt = kwb_cuda_buffer_dtype(b);
    if (dt < KWB_DTYPE_COUNT && !kwb_dtype_is_float((kwb_dtype)dt) && floor(hi) - ceil(lo) + 1 < 1)
        return kwb_fail(KWB_EINVAL, "no integer lies in [%g, %g]", lo, hi);
    return fill(b, seed, lo, hi, 0);
}

int kwb_cuda_buffer_fill_normal(kwb_cuda_buffer *b, uint64_t seed, double mean, double stdev) {
    if (!(stdev >= 0)) return kwb_fail(KWB_EINVAL, "normal fill needs stdev >= 0 (got %g)", stdev);
    return fill(b, seed, mean, stdev, 1);
}

int kwb_cuda_buffer_fill_value(kwb_cuda_buffer *b, double v) { return fill(b, 0, v, 0, 2); }

int kwb_cuda_buffer_fill_normal_stream(kwb_cuda_buffer *b, uint64_t seed, double mean, double stdev) {
    if (!(stdev >= 0)) return kwb_fail(KWB_EINVAL, "normal fill needs stdev >= 0 (got %g)", stdev);
    return fill(b, seed, mean, stdev, 3);
}

/* Queue the poison fill on the harness stream without waiting (graph capture
 * records it as nodes). */
int kwb_cuda_buffer_poison_enqueue(kwb_cuda_buffer *b) {
    kwb_cuda_ctx *c = kwb_cuda_ctx_get();
    if (!c) return KWB_ERUN;
    CUdeviceptr p = kwb_cuda_buffer_ptr(b);
    uint64_t n = kwb_cuda_buffer_len(b);
    switch (kwb_cuda_buffer_dtype(b)) {
    case KWB_F32: return kwb_cu_check(c->cu->MemsetD32Async(p, 0x7fa5a5a5u, n, c->stream), "poison");
    case KWB_F16: return kwb_cu_check(c->cu->MemsetD16Async(p, 0x7d5a, n, c->stream), "poison");
    case KWB_BF16: return kwb_cu_check(c->cu->MemsetD16Async(p, 0x7fa5, n, c->stream), "poison");
    case KWB_CUDA_E4M3: return kwb_cu_check(c->cu->MemsetD8Async(p, 0x7f, n, c->stream), "poison");
    case KWB_F64: {
        CUfunction f = kwb_cuda_builtin("kwb_fill64");
        if (!f) return KWB_ERUN;
        unsigned long long nn = n, bits = 0x7ff4a5a5a5a5a5a5ull;
        void *args[] = {&p, &nn, &bits};
        return kwb_cu_check(c->cu->LaunchKernel(f, grid_for(n), 1, 1, 256, 1, 1, 0, c->stream, args, NULL), "poison");
    }
    default: return kwb_cu_check(c->cu->MemsetD8Async(p, 0xa5, kwb_cuda_buffer_bytes(b), c->stream), "poison");
    }
}

/* Queued as well (see fill). */
int kwb_cuda_buffer_poison(kwb_cuda_buffer *b) { return kwb_cuda_buffer_poison_enqueue(b); }

/* A small device scratch area for results, kept for the process. */
static CUdeviceptr scratch(kwb_cuda_ctx *c) {
    static CUdeviceptr s;
    if (!s && kwb_cu_check(c->cu->MemAlloc(&s, 256), "allocating a result buffer")) return 0;
    return s;
}

static uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t kwb_cuda_checksum_host(const void *data, size_t bytes) {
    const unsigned char *p = data;
    uint64_t h = 0;
    for (size_t w = 0; w < (bytes + 7) / 8; w++) {
        uint64_t v = 0;
        for (size_t k = 0; k < 8 && w * 8 + k < bytes; k++) v |= (uint64_t)p[w * 8 + k] << (8 * k);
        h += mix(v ^ (w * 0x9e3779b97f4a7c15ull + 0xd1b54a32d192ed03ull));
    }
    return mix(h ^ bytes);
}

/* The keyed sum of a buffer's words into h, or with h NULL the same device
 * work queued and nothing read back. */
static int sum_words(const kwb_cuda_buffer *b, unsigned long long key, uint64_t *h) {
    kwb_cuda_ctx *c = kwb_cuda_ctx_get();
    if (!c) return KWB_ERUN;
    CUdeviceptr r = scratch(c), p = kwb_cuda_buffer_ptr(b);
    if (!r) return KWB_ERUN;
    unsigned long long bytes = kwb_cuda_buffer_bytes(b);
    int rc = kwb_cu_check(c->cu->MemsetD8Async(r, 0, 8, c->stream), "checksum");
    void *args[] = {&p, &bytes, &key, &r};
    if (!h) return rc ? rc : queue_builtin("kwb_checksum", grid_for((bytes + 7) / 8), 256, args);
    if (!rc) rc = run_builtin("kwb_checksum", grid_for((bytes + 7) / 8), 256, args);
    if (!rc) rc = kwb_cu_check(c->cu->MemcpyDtoH(h, r, 8), "checksum");
    return rc;
}

int kwb_cuda_buffer_checksum(const kwb_cuda_buffer *b, uint64_t *sum) {
    uint64_t h = 0;
    int rc = sum_words(b, 0xd1b54a32d192ed03ull, &h);
    *sum = mix(h ^ kwb_cuda_buffer_bytes(b));
    return rc;
}

/* Keyed: each word mixed with its index and the key, which never reaches
 * the device before the candidate's call has returned. */
int kwb_cuda_buffer_digest(const kwb_cuda_buffer *b, uint64_t key, uint64_t *sum) {
    uint64_t h = 0;
    int rc = sum_words(b, mix(key ^ 0x632be59bd9b4e019ull), &h);
    *sum = mix(h ^ key ^ kwb_cuda_buffer_bytes(b));
    return rc;
}

/* The digest's device work, queued and never read back: a run not checked
 * against the reference does to the device what a checked one does, so
 * nothing on the device tells the two apart. */
int kwb_cuda_buffer_digest_queue(const kwb_cuda_buffer *b, uint64_t key) {
    return sum_words(b, mix(key ^ 0x632be59bd9b4e019ull), NULL);
}

int kwb_cuda_buffer_poisoned(const kwb_cuda_buffer *b, uint64_t *count, int64_t *first) {
    kwb_cuda_ctx *c = kwb_cuda_ctx_get();
    if (!c) return KWB_ERUN;
    CUdeviceptr r = scratch(c), p = kwb_cuda_buffer_ptr(b);
    if (!r) return KWB_ERUN;
    uint64_t res[2] = {0, ~0ull};
    int dt = kwb_cuda_buffer_dtype(b);
    unsigned long long n = kwb_cuda_buffer_len(b);
    void *args[] = {&p, &dt, &n, &r};
    int rc = kwb_cu_check(c->cu->MemcpyHtoDAsync(r, res, sizeof res, c->stream), "counting poison");
    if (!rc) rc = run_builtin("kwb_poisoned", grid_for(n), 256, args);
    if (!rc) rc = kwb_cu_check(c->cu->MemcpyDtoH(res, r, sizeof res), "counting poison");
    *count = res[0];
    *first = res[1] == ~0ull ? -1 : (int64_t)res[1];
    return rc;
}

/* After a call, in one launch and one wait: the guard bands of n buffers
 * (hit[i] = 1 where buffer i's changed, with first[i] and last[i] as
 * kwb_cuda_guard gives them, and its bands filled again) and, for m outputs,
 * the elements still poison (count[j], pfirst[j]: -1 for none). The table
 * and the results go through page-locked memory kept for the process. */
int kwb_cuda_buffers_check(kwb_cuda_buffer *const *bufs, uint32_t n, kwb_cuda_buffer *const *outs, uint32_t m,
                           int *hit, int64_t *first, int64_t *last, uint64_t *count, int64_t *pfirst) {
    if (n + m == 0) return 0;
    if (n + m > 65535) return kwb_fail(KWB_EINVAL, "at most 65535 buffers checked at once (got %u)", n + m);
    kwb_cuda_ctx *c = kwb_cuda_ctx_get();
    if (!c) return KWB_ERUN;
    static CUdeviceptr area;
    static uint64_t *stage;
    static size_t area_bytes;
    size_t rows = (size_t)n + m, need = rows * 7 * 8;
    if (area_bytes < need) {
        if (area) c->cu->MemFree(area);
        if (stage) c->cu->MemFreeHost(stage);
        area = 0, stage = NULL, area_bytes = 0;
        if (kwb_cu_check(c->cu->MemAlloc(&area, need), "allocating the guard band table") ||
            kwb_cu_check(c->cu->MemAllocHost((void **)&stage, need), "allocating the guard band table"))
            return KWB_ERUN;
        area_bytes = need;
    }
    uint64_t *res = stage + 5 * rows, most = 0;
    for (uint32_t i = 0; i < n; i++) {
        CUdeviceptr before, after;
        unsigned long long nb, na, pattern;
        kwb_cuda_buffer_zones(bufs[i], &before, &nb, &after, &na, &pattern);
        uint64_t *d = stage + 5 * (size_t)i;
        d[0] = before, d[1] = nb, d[2] = after, d[3] = na, d[4] = pattern;
        res[2 * i] = ~0ull, res[2 * i + 1] = 0;
        if (nb + na > most) most = nb + na;
    }
    for (uint32_t j = 0; j < m; j++) {
        uint64_t *d = stage + 5 * ((size_t)n + j), len = kwb_cuda_buffer_len(outs[j]);
        d[0] = kwb_cuda_buffer_ptr(outs[j]), d[1] = (uint64_t)kwb_cuda_buffer_dtype(outs[j]), d[2] = len, d[3] = d[4] = 0;
        res[2 * (n + j)] = 0, res[2 * (n + j) + 1] = ~0ull;
        if (len > most) most = len;
    }
    CUdeviceptr r = area + 5 * 8 * rows;
    unsigned long long ng = n;
    CUfunction f = kwb_cuda_builtin("kwb_zones");
    if (!f) return KWB_ERUN;
    void *args[] = {&area, &ng, &r};
    int rc = kwb_cu_check(c->cu->MemcpyHtoDAsync(area, stage, need, c->stream), "checking guard bands");
    if (!rc) rc = kwb_cu_check(c->cu->LaunchKernel(f, grid_for(most), (unsigned)rows, 1, 256, 1, 1, 0, c->stream,
                                                   args, NULL), "checking guard bands");
    if (!rc) rc = kwb_cu_check(c->cu->MemcpyDtoHAsync(res, r, 2 * 8 * rows, c->stream), "checking guard bands");
    /* (always: the staging area is reused, and on an error a copy may still be in flight) */
    int wrc = kwb_cu_check(c->cu->StreamSynchronize(c->stream), "checking guard bands");
    if (!rc) rc = wrc;
    for (uint32_t j = 0; !rc && j < m; j++) {
        count[j] = res[2 * (n + j)];
        pfirst[j] = res[2 * (n + j) + 1] == ~0ull ? -1 : (int64_t)res[2 * (n + j) + 1];
    }
    for (uint32_t i = 0; !rc && i < n; i++) {
        hit[i] = res[2 * i] != ~0ull;
        if (!hit[i]) continue;
        /* the one that changed: its offsets, its bands filled again */
        rc = kwb_cuda_guard(bufs[i], 0, &hit[i], &first[i], &last[i]);
    }
    return rc;
}

int kwb_cuda_buffers_redzone(kwb_cuda_buffer *const *bufs, uint32_t n, int *hit, int64_t *first, int64_t *last) {
    return kwb_cuda_buffers_check(bufs, n, NULL, 0, hit, first, last, NULL, NULL);
}

/* The guard bands: filled (fill = 1), or checked, the first and last byte
 * offsets that differ relative to the buffer's first byte (negative: before
 * it) and the bands filled again. *hit = 0 when intact. */
int kwb_cuda_guard(kwb_cuda_buffer *b, int fill, int *hit, int64_t *first, int64_t *last) {
    kwb_cuda_ctx *c = kwb_cuda_ctx_get();
    if (!c) return KWB_ERUN;
    CUdeviceptr r = scratch(c), before, after;
    unsigned long long nb, na, pattern;
    kwb_cuda_buffer_zones(b, &before, &nb, &after, &na, &pattern);
    if (!r) return KWB_ERUN;
    uint64_t res[2] = {~0ull, 0};
    void *args[] = {&before, &nb, &after, &na, &pattern, &fill, &r};
    int rc = fill ? 0 : kwb_cu_check(c->cu->MemcpyHtoDAsync(r, res, sizeof res, c->stream), "checking guard bands");
    if (!rc) rc = run_builtin("kwb_guard", grid_for(nb + na), 256, args);
    if (!rc && !fill) rc = kwb_cu_check(c->cu->MemcpyDtoH(res, r, sizeof res), "checking guard bands");
    if (rc || fill) return rc;
    *hit = res[0] != ~0ull;
    if (!*hit) return 0;
    int64_t bytes = (int64_t)kwb_cuda_buffer_bytes(b);
    *first = res[0] < nb ? (int64_t)res[0] - (int64_t)nb : bytes + (int64_t)(res[0] - nb);
    *last = res[1] < nb ? (int64_t)res[1] - (int64_t)nb : bytes + (int64_t)(res[1] - nb);
    int one = 1;
    void *again[] = {&before, &nb, &after, &na, &pattern, &one, &r};
    return run_builtin("kwb_guard", grid_for(nb + na), 256, again);
}

int kwb_cuda_compare(const kwb_cuda_buffer *out, const kwb_cuda_buffer *ref, double atol, double rtol,
                     kwb_diff *d) {
    uint64_t n = kwb_cuda_buffer_len(out);
    if (kwb_cuda_buffer_len(ref) != n)
        return kwb_fail(KWB_EINVAL, "compare needs equal lengths (out has %llu, ref has %llu)",
                        (unsigned long long)n, (unsigned long long)kwb_cuda_buffer_len(ref));
    kwb_cuda_ctx *c = kwb_cuda_ctx_get();
    if (!c) return KWB_ERUN;
    CUdeviceptr r = scratch(c), po = kwb_cuda_buffer_ptr(out), pr = kwb_cuda_buffer_ptr(ref);
    if (!r) return KWB_ERUN;
    uint64_t init[11] = {0}, res[11];
    init[8] = ~0ull;
    int dto = kwb_cuda_buffer_dtype(out), dtr = kwb_cuda_buffer_dtype(ref);
    unsigned long long nn = n;
    void *args[] = {&po, &dto, &pr, &dtr, &nn, &atol, &rtol, &r};
    int rc = kwb_cu_check(c->cu->MemcpyHtoDAsync(r, init, sizeof init, c->stream), "compare");
    if (!rc) rc = run_builtin("kwb_compare", grid_for(n), 256, args);
    if (!rc) rc = kwb_cu_check(c->cu->MemcpyDtoH(res, r, sizeof res), "compare");
    if (rc) return rc;
    double v[4], rsum;
    memcpy(v, res, sizeof v);
    memcpy(&rsum, &res[10], sizeof rsum);
    *d = (kwb_diff){.max_abs = v[0], .max_rel = v[1], .n = n, .nan = res[4], .inf = res[5],
                    .poison = res[6], .bad = res[7], .ref_nonfinite = res[9], .worst = -1,
                    .first_bad = res[8] == ~0ull ? -1 : (int64_t)res[8]};
    d->rel_l2 = v[3] > 0 ? sqrt(v[2] / v[3]) : sqrt(v[2]);
    if (n > d->ref_nonfinite) d->ref_mean = rsum / (double)(n - d->ref_nonfinite);
    return 0;
}

/* ---- ceilings ---------------------------------------------------------- */

int kwb_cuda_measure_fma(double *flops_per_s) {
    CUfunction f = kwb_cuda_builtin("kwb_fma");
    if (!f) return KWB_ERUN;
    kwb_cuda_ctx *c = kwb_cuda_ctx_get();
    CUdeviceptr out = scratch(c);
    int iters = 4096;
    float seed = 1.0f;
    void *args[] = {&out, &iters, &seed};
    unsigned grid = (unsigned)c->info.sms * 8, block = 256;
    double s = 0;
    int rc = kwb_cuda_time_launch(f, grid, block, args, 10, &s);
    if (rc) return rc;
    *flops_per_s = 2.0 * 8 * iters * (double)grid * block / s;
    return 0;
}

int kwb_cuda_measure_bf16(uint32_t n, int own, double *flops_per_s, const char **via) {
    kwb_cuda_ctx *c = kwb_cuda_ctx_get();
    if (!c) return KWB_ERUN;
    const kwb_cublas_api *cb = own ? NULL : kwb_cublas();
    if (!cb) {
        *via = "kwb-wmma";
        CUfunction f = get_fn(&wmma_mod, kwb_cuda_wmma_source, "kwb_wmma.cu", "kwb_wmma_bf16");
        if (!f) return KWB_ERUN;
        CUdeviceptr out = scratch(c);
        int iters = 8192;
        void *args[] = {&out, &iters};
        unsigned grid = (unsigned)c->info.sms * 8, block = 256;
        double s = 0;
        int rc = kwb_cuda_time_launch(f, grid, block, args, 10, &s);
        if (rc) return rc;
        /* 4 mma of 16x16x16 per warp and iteration */
        *flops_per_s = 2.0 * 16 * 16 * 16 * 4 * iters * ((double)grid * block / 32) / s;
        return 0;
    }
    *via = "cublas";
    kwb_cuda_buffer *a = kwb_cuda_buffer_new(KWB_BF16, (uint64_t)n * n);
    kwb_cuda_buffer *b = a ? kwb_cuda_buffer_new(KWB_BF16, (uint64_t)n * n) : NULL;
    kwb_cuda_buffer *d = b ? kwb_cuda_buffer_new(KWB_BF16, (uint64_t)n * n) : NULL;
    int rc = d ? 0 : KWB_ENOMEM;
    /* random data: zeros run faster than real inputs */
    if (!rc) rc = kwb_cuda_buffer_fill_uniform(a, 1, -1, 1);
    if (!rc) rc = kwb_cuda_buffer_fill_uniform(b, 2, -1, 1);
    cublasHandle_t h = NULL;
    if (!rc && cb->Create(&h) != 0) rc = kwb_fail(KWB_ERUN, "cublasCreate failed");
    if (!rc && cb->SetStream(h, c->stream) != 0) rc = kwb_fail(KWB_ERUN, "cublasSetStream failed");
    CUevent e0 = NULL, e1 = NULL;
    if (!rc) rc = kwb_cu_check(c->cu->EventCreate(&e0, 0), "cuEventCreate");
    if (!rc) rc = kwb_cu_check(c->cu->EventCreate(&e1, 0), "cuEventCreate");
    float alpha = 1, beta = 0;
    double best = INFINITY;
    for (int r = 0; !rc && r < 12; r++) {   /* two warm-ups; the fastest of ten */
        void *pa = (void *)(uintptr_t)kwb_cuda_buffer_ptr(a), *pb = (void *)(uintptr_t)kwb_cuda_buffer_ptr(b),
             *pd = (void *)(uintptr_t)kwb_cuda_buffer_ptr(d);
        rc = kwb_cu_check(c->cu->EventRecord(e0, c->stream), "cuEventRecord");
        /* CUBLAS_OP_N, CUDA_R_16BF = 14, CUBLAS_COMPUTE_32F = 68, CUBLAS_GEMM_DEFAULT = -1 */
        int st = rc ? 0 : cb->GemmEx(h, 0, 0, (int)n, (int)n, (int)n, &alpha, pa, 14, (int)n, pb, 14, (int)n,
                                     &beta, pd, 14, (int)n, 68, -1);
        if (st != 0) rc = kwb_fail(KWB_ERUN, "cublasGemmEx failed with status %d", st);
        if (!rc) rc = kwb_cu_check(c->cu->EventRecord(e1, c->stream), "cuEventRecord");
        if (!rc) rc = kwb_cu_check(c->cu->StreamSynchronize(c->stream), "cublasGemmEx");
        float ms = 0;
        if (!rc) rc = kwb_cu_check(c->cu->EventElapsedTime(&ms, e0, e1), "cuEventElapsedTime");
        if (!rc && r >= 2 && ms * 1e-3 < best) best = ms * 1e-3;
    }
    if (e0) c->cu->EventDestroy(e0);
    if (e1) c->cu->EventDestroy(e1);
    if (h) cb->Destroy(h);
    kwb_cuda_buffer_free(a);
    kwb_cuda_buffer_free(b);
    kwb_cuda_buffer_free(d);
    if (!rc) *flops_per_s = 2.0 * n * (double)n * n / best;
    return rc;
}
