// gen.cu: NVFP4 weights generated and quantised on the GPU, for weight sets too
// large for the CPU reference (DeepSeek-V3's routed experts are 11.3e9 weights).
// Everything here reproduces kernels/nvfp4_moe/nvfp4_ref.c:
//   - the weight generator (nvfp4_gen_weights): element i of seed s is
//     bf16(std * normal(s, i)), times outlier_scale where u01(s, i) < outlier_rate,
//     with kwb's counter-based stream (splitmix64 finaliser, Box-Muller) in
//     float64 and one rounding to bf16 (to nearest, ties to even);
//   - the quantiser (nvfp4_quantize) in the same float32 and float64 steps:
//     s2 = amax / 2688, block scale e4m3(bmax / (6 * s2)) with a zero ratio
//     giving 1.0, code = e2m1(x / (e4m3 scale * s2)) with ModelOpt's boundaries.
// The quantiser's arithmetic is IEEE basic operations only, so for the same
// bf16 input q, sf and s2 equal the CPU's bit for bit. The generator goes
// through CUDA's float64 log and cos, which may differ from the C library's in
// the last bit; a weight changes only where the float64 value lies within an
// ulp or two of a bf16 rounding boundary (odds below 10^-12 a weight).
//
// Layouts (those of nvfp4_ref.c; a batch of matrices of rows x cols back to
// back, cols a multiple of 16, so everything below depends only on per16 =
// rows * cols / 16, the 16-element blocks of one matrix):
//   q    uint8 [batch, rows, cols/2]   two e2m1 codes a byte, even element low
//   sf   e4m3  [batch, rows, cols/16]  one block scale per 16 elements (linear)
//   s2   f32   [batch]
//   amax u32   [batch]                 scratch: the float bits of max |w|
//   bad  u32   [1]                     scratch: nonzero if a weight is NaN or Inf
//
// Device code only, for NVRTC; no headers; bf16 carried as unsigned short; all
// element and block indices 64-bit. Compile with --fmad=false (no arithmetic
// here has the a * b + c shape, but contraction must not change a rounding).
// Launch plan of a quantisation (in order, one stream; block 256 everywhere;
// amax and bad zeroed first; `iters` blocks of 16 a thread, e.g. 16):
//   nvfp4_gen_amax | nvfp4_bf16_amax          grid ceil(batch*per16 / (256*iters))
//   nvfp4_s2                                  grid ceil(batch / 256)
//   nvfp4_gen_quantize | nvfp4_bf16_quantize  grid ceil(batch*per16 / (256*iters))
// and for generated values alone:
//   nvfp4_gen_bf16                            grid-stride over n, any grid
// and for the fragment-major copy of a quantised tensor (below):
//   nvfp4_pack                                grid-stride over its 16-byte pieces, any grid
//   nvfp4_pack_rg                             grid-stride over its 4-byte words, any grid
// A block of 256 threads takes 256*iters consecutive 16-element blocks, thread
// t the blocks t, t + 256, ...: stores stay coalesced and a thread meets a new
// matrix rarely, so the per-matrix maxima cost few atomics.
// Compile check (no GPU needed): nvcc -arch=sm_90 -cubin -o /tmp/gen.cubin kernels/nvfp4_moe/gen.cu

typedef unsigned long long gen_u64;

// ---- the generator (nvfp4_ref.c's mix, rng_bits, rng_u01, rng_normal) ------

__device__ __forceinline__ gen_u64 gen_mix(gen_u64 z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// rng_bits(seed, i) = mix(key ^ (i * golden + c)) with key = mix(seed + golden),
// the same for every i: kept in the rule.
__device__ __forceinline__ gen_u64 gen_bits(gen_u64 key, gen_u64 i) {
    return gen_mix(key ^ (i * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull));
}

__device__ __forceinline__ gen_u64 gen_key(gen_u64 seed) { return gen_mix(seed + 0x9e3779b97f4a7c15ull); }

// ---- float64 -> bf16, one rounding (nvfp4_bf16_from_f64) -------------------

__device__ __forceinline__ unsigned short gen_bf16_from_f64(double x) {
    gen_u64 u = (gen_u64)__double_as_longlong(x);
    unsigned short sign = (unsigned short)((u >> 48) & 0x8000u);
    u &= 0x7fffffffffffffffull;
    if (u > 0x7ff0000000000000ull) return 0x7fc0;                   // NaN
    if (u == 0) return sign;
    double r;
    if (u == 0x7ff0000000000000ull) r = __longlong_as_double((long long)u);
    else if (u >= 0x3810000000000000ull) {                            // >= 2^-126: 8 significant bits
        u += 0xfffffffffffull + ((u >> 45) & 1u);                     // to nearest, ties to even
        r = __longlong_as_double((long long)(u & ~0x1fffffffffffull));
    } else {                                                          // below: multiples of 2^-133
        r = rint(__longlong_as_double((long long)u) * 0x1p133) * 0x1p-133;
    }
    if (r >= 0x1p128) return sign | 0x7f80;
    return sign | (unsigned short)(__float_as_uint((float)r) >> 16);   // (float)r is exact
}

// The weight rule: keys of the two streams, std, outlier rate and scale.
struct gen_rule {
    gen_u64 key_u;      // stream `seed`: the outlier draw
    gen_u64 key_n;      // stream `seed ^ 0x5851f42d4c957f2d`: Box-Muller's pair
    double std, rate, scale;
};

__device__ __forceinline__ gen_rule gen_make_rule(gen_u64 seed, double std, double rate, double scale) {
    gen_rule g;
    g.key_u = gen_key(seed);
    g.key_n = gen_key(seed ^ 0x5851f42d4c957f2dull);
    g.std = std;
    g.rate = rate;
    g.scale = scale;
    return g;
}

// Element i of the weight stream, as bf16 bits.
__device__ __forceinline__ unsigned short gen_weight(const gen_rule &g, gen_u64 i) {
    double u1 = ((double)(gen_bits(g.key_n, 2 * i) >> 11) + 1.0) * 0x1p-53;
    double u2 = (double)(gen_bits(g.key_n, 2 * i + 1) >> 11) * 0x1p-53;
    double v = g.std * (sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
    if ((double)(gen_bits(g.key_u, i) >> 11) * 0x1p-53 < g.rate) v *= g.scale;
    return gen_bf16_from_f64(v);
}

// ---- scalar formats (nvfp4_e4m3_from_f64, nvfp4_e4m3_to_f64, nvfp4_e2m1_from_f64)

__device__ __forceinline__ double gen_round_grid(double a, int mant, int emin) {
    int e = ilogb(a);
    if (e < emin) e = emin;
    double quantum = ldexp(1.0, e - mant);
    return rint(a / quantum) * quantum;
}

__device__ __forceinline__ unsigned gen_e4m3_from_f64(double x) {
    if (x != x) return 0x7fu;
    unsigned sign = __double_as_longlong(x) < 0 ? 0x80u : 0u;
    double a = fabs(x);
    if (a >= 448.0) return sign | 0x7eu;
    if (a == 0.0) return sign;
    double r = gen_round_grid(a, 3, -6);
    if (r == 0.0) return sign;
    int e = ilogb(r);
    if (e < -6) return sign | (unsigned)ldexp(r, 9);
    unsigned m = (unsigned)(ldexp(r, -e) * 8.0) - 8u;
    return sign | (unsigned)(e + 7) << 3 | m;
}

__device__ __forceinline__ double gen_e4m3_to_f64(unsigned code) {
    code &= 0xffu;
    if ((code & 0x7fu) == 0x7fu) return __longlong_as_double(0x7ff8000000000000ll);
    unsigned e = (code >> 3) & 15u, m = code & 7u;
    double v = e == 0 ? ldexp((double)m, -9) : ldexp(1.0 + m / 8.0, (int)e - 7);
    return code & 0x80u ? -v : v;
}

// The code of y: boundaries strictly below |y|, plus one at the ties 0.75,
// 1.75, 3.5; NaN -> 7; the sign bit where y < 0. (The comparisons are exact
// in float: every boundary is a float.)
__device__ __forceinline__ unsigned gen_e2m1_from_f32(float y) {
    unsigned sign = y < 0.0f ? 8u : 0u;
    float a = fabsf(y);
    if (a != a) return 7u;
    unsigned code = (a > 0.25f) + (a > 0.75f) + (a > 1.25f) + (a > 1.75f) + (a > 2.5f) + (a > 3.5f)
                  + (a > 5.0f);
    if (a == 0.75f || a == 1.75f || a == 3.5f) code++;
    return sign | code;
}

// ---- sources of 16-element blocks -----------------------------------------

// Generated weights: block `blk` of the whole batch is elements 16*blk ... + 15.
struct gen_src {
    gen_rule g;
    __device__ __forceinline__ void load16(long long blk, unsigned short h[16]) const {
        gen_u64 i0 = (gen_u64)blk * 16u;
        #pragma unroll 1
        for (int i = 0; i < 16; i++) h[i] = gen_weight(g, i0 + (gen_u64)i);   // one copy of log and cos
    }
};

// A bf16 buffer (16-byte aligned, as device buffers are).
struct buf_src {
    const unsigned short *w;
    __device__ __forceinline__ void load16(long long blk, unsigned short h[16]) const {
        const uint4 *p = (const uint4 *)(w + blk * 16);
        uint4 a = p[0], b = p[1];
        unsigned words[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
        #pragma unroll
        for (int i = 0; i < 8; i++) {
            h[2 * i] = (unsigned short)(words[i] & 0xffffu);
            h[2 * i + 1] = (unsigned short)(words[i] >> 16);
        }
    }
};

__device__ __forceinline__ float gen_bf16_to_f32(unsigned short h) { return __uint_as_float((unsigned)h << 16); }

// ---- the passes ------------------------------------------------------------

// The 16-element blocks of this CUDA block: 256 * iters consecutive ones, of
// which thread t takes t, t + 256, ... (below total).
__device__ __forceinline__ long long gen_span_end(long long total, int iters) {
    long long end = ((long long)blockIdx.x + 1) * blockDim.x * iters;
    return end < total ? end : total;
}

__device__ __forceinline__ long long gen_span_first(int iters) {
    return (long long)blockIdx.x * blockDim.x * iters + threadIdx.x;
}

// Per-matrix max of |w| into amax (float bits: values >= 0 order as their bits
// do), and bad = 1 where a weight is NaN or infinite.
__device__ __forceinline__ void gen_flush_amax(unsigned *amax, long long b, unsigned m) {
    if (b >= 0 && m != 0 && m > amax[b]) atomicMax(amax + b, m);   // amax only grows: a stale read costs an atomic
}

template <class S>
__device__ __forceinline__ void gen_amax_pass(const S &src, long long batch, long long per16, int iters,
                                              unsigned *amax, unsigned *bad) {
    long long end = gen_span_end(batch * per16, iters), cur = -1, next = 0;
    unsigned m = 0, nonfinite = 0;             // m: the largest |w| as bf16 bits
    for (long long blk = gen_span_first(iters); blk < end; blk += blockDim.x) {
        if (blk >= next) {                       // a new matrix
            gen_flush_amax(amax, cur, m << 16);
            cur = blk / per16;
            next = (cur + 1) * per16;
            m = 0;
        }
        unsigned short h[16];
        src.load16(blk, h);
        #pragma unroll
        for (int i = 0; i < 16; i++) {
            unsigned a = (unsigned)(h[i] & 0x7fffu);
            nonfinite |= a >= 0x7f80u;
            if (a > m) m = a;
        }
    }
    gen_flush_amax(amax, cur, m << 16);
    if (nonfinite) atomicOr(bad, 1u);
}

// One matrix's 16-element block: its scale byte and 8 bytes of codes.
template <class S>
__device__ __forceinline__ void gen_quantize_block(const S &src, long long blk, float amax, float gs,
                                                   unsigned char *q, unsigned char *sf) {
    unsigned short h[16];
    src.load16(blk, h);
    float bmax = 0.0f;
    #pragma unroll
    for (int i = 0; i < 16; i++) {
        float v = fabsf(gen_bf16_to_f32(h[i]));
        if (v > bmax) bmax = v;
    }
    float six_gs = __fmul_rn(6.0f, gs);
    float ratio = amax > 0.0f ? __fdiv_rn(bmax, six_gs) : 0.0f;
    if (ratio == 0.0f) ratio = 1.0f;
    unsigned code = gen_e4m3_from_f64((double)ratio);
    sf[blk] = (unsigned char)code;
    float denom = __fmul_rn((float)gen_e4m3_to_f64(code), gs);
    unsigned lo = 0, hi = 0;
    #pragma unroll
    for (int i = 0; i < 8; i++) {
        lo |= gen_e2m1_from_f32(__fdiv_rn(gen_bf16_to_f32(h[i]), denom)) << (4 * i);
        hi |= gen_e2m1_from_f32(__fdiv_rn(gen_bf16_to_f32(h[8 + i]), denom)) << (4 * i);
    }
    ((gen_u64 *)q)[blk] = (gen_u64)lo | (gen_u64)hi << 32;           // little endian: element 0 low
}

template <class S>
__device__ __forceinline__ void gen_quantize_pass(const S &src, long long batch, long long per16, int iters,
                                                  const unsigned *amax, const float *s2,
                                                  unsigned char *q, unsigned char *sf) {
    long long end = gen_span_end(batch * per16, iters), next = 0;
    float am = 0.0f, gs = 1.0f;
    for (long long blk = gen_span_first(iters); blk < end; blk += blockDim.x) {
        if (blk >= next) {
            long long b = blk / per16;
            next = (b + 1) * per16;
            am = __uint_as_float(amax[b]);
            gs = s2[b];
        }
        gen_quantize_block(src, blk, am, gs, q, sf);
    }
}

// ---- kernels ---------------------------------------------------------------

// out[j] = weight first + j of seed's stream, j < n (grid-stride).
extern "C" __global__ void __launch_bounds__(256)
nvfp4_gen_bf16(gen_u64 seed, double std, double rate, double scale, long long first, long long n,
               unsigned short *out) {
    gen_rule g = gen_make_rule(seed, std, rate, scale);
    for (long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x; j < n;
         j += (long long)gridDim.x * blockDim.x)
        out[j] = gen_weight(g, (gen_u64)(first + j));
}

extern "C" __global__ void __launch_bounds__(256)
nvfp4_gen_amax(gen_u64 seed, double std, double rate, double scale, long long batch, long long per16,
               int iters, unsigned *amax, unsigned *bad) {
    gen_src s;
    s.g = gen_make_rule(seed, std, rate, scale);
    gen_amax_pass(s, batch, per16, iters, amax, bad);
}

extern "C" __global__ void __launch_bounds__(256)
nvfp4_bf16_amax(const unsigned short *w, long long batch, long long per16, int iters, unsigned *amax,
                unsigned *bad) {
    buf_src s;
    s.w = w;
    gen_amax_pass(s, batch, per16, iters, amax, bad);
}

// s2[b] = amax[b] / 2688 in float32, or 1 for an all-zero matrix.
extern "C" __global__ void __launch_bounds__(256)
nvfp4_s2(long long batch, const unsigned *amax, float *s2) {
    long long b = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= batch) return;
    float a = __uint_as_float(amax[b]);
    s2[b] = a > 0.0f ? __fdiv_rn(a, 2688.0f) : 1.0f;
}

extern "C" __global__ void __launch_bounds__(256)
nvfp4_gen_quantize(gen_u64 seed, double std, double rate, double scale, long long batch, long long per16,
                   int iters, const unsigned *amax, const float *s2, unsigned char *q, unsigned char *sf) {
    gen_src s;
    s.g = gen_make_rule(seed, std, rate, scale);
    gen_quantize_pass(s, batch, per16, iters, amax, s2, q, sf);
}

extern "C" __global__ void __launch_bounds__(256)
nvfp4_bf16_quantize(const unsigned short *w, long long batch, long long per16, int iters,
                    const unsigned *amax, const float *s2, unsigned char *q, unsigned char *sf) {
    buf_src s;
    s.w = w;
    gen_quantize_pass(s, batch, per16, iters, amax, s2, q, sf);
}

// ---- the fragment-major layout -----------------------------------------------
//
// The same codes and scales, permuted within each slab of 16 rows so that the
// loads of an mma.sync m16n8k16 kernel (kernels/nvfp4_moe/w4a16.cu, WL = 1)
// are contiguous: for slab m (rows 16m..16m+15 of all batch * rows rows), the
// 128-column chunk c, half h (0: rows 16m+g, 1: rows 16m+8+g) and lane
// l = 4g + j (g 0..7, j 0..3):
//   qp[8*cols*m + 1024*c + 512*h + 16*l .. +15]
//        = q[(16m + 8h + g) * cols/2 + 64c + 16j .. +15]         (32 codes)
//   sfp[cols*m + 128*c + 4*l .. +3]
//        = sf[(16m + g) * cols/16 + 8c + 2j .. +1], sf[(16m + 8 + g) * cols/16 + 8c + 2j .. +1]
// A slab keeps its place (8 * cols code bytes, cols scale bytes), so an
// expert's rows stay where they were. Needs rows % 16 == 0, cols % 128 == 0.
// slabs = batch * rows / 16.
extern "C" __global__ void __launch_bounds__(256)
nvfp4_pack(long long slabs, int cols, const unsigned char *q, const unsigned char *sf, unsigned char *qp,
           unsigned char *sfp) {
    const long long chunks = cols / 128, n = slabs * chunks * 64;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        const int p = (int)(i & 63), h = p >> 5, l = p & 31, g = l >> 2, j = l & 3;
        const long long c = (i >> 6) % chunks, m = (i >> 6) / chunks;
        const long long row = 16 * m + 8 * h + g;
        *(uint4 *)(qp + 16 * i) = *(const uint4 *)(q + row * (cols / 2) + 64 * c + 16 * j);
        if (h == 0) {
            const unsigned char *s0 = sf + row * (cols / 16) + 8 * c + 2 * j, *s1 = s0 + 8 * (cols / 16);
            unsigned char *d = sfp + m * cols + 128 * c + 4 * l;
            d[0] = s0[0]; d[1] = s0[1]; d[2] = s1[0]; d[3] = s1[1];
        }
    }
}

// ---- the rg layout of the codes ----------------------------------------------
//
// The codes reordered within each 64-byte block (a row's 128-element chunk)
// for the register-A wgmma kernels (w4a16.cu, LW = 2), whose lane q needs the
// byte q of each of the block's 16 four-byte words (elements 8p + 2q, 8p + 2q + 1):
//   qr[64b + 16q + p] = q[64b + 4p + q]       (q 0..3, p 0..15)
// so lane q's 16 bytes are contiguous. Block scales are not moved. One thread
// a 4-byte output word, any grid; blocks = batch * rows * cols / 128.
extern "C" __global__ void __launch_bounds__(256)
nvfp4_pack_rg(long long blocks, const unsigned char *q, unsigned char *qr) {
    const long long n = blocks * 16;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        const long long b = i >> 4;
        const int w = (int)(i & 15), lane = w >> 2, p0 = 4 * (w & 3);
        const unsigned char *src = q + 64 * b + lane;
        const unsigned int v = (unsigned int)src[4 * p0] | (unsigned int)src[4 * p0 + 4] << 8 |
                               (unsigned int)src[4 * p0 + 8] << 16 | (unsigned int)src[4 * p0 + 12] << 24;
        *(unsigned int *)(qr + 4 * i) = v;
    }
}

// ---- routing ------------------------------------------------------------------
//
// nvfp4_ref.c's nvfp4_gen_routing, one thread a token, the same arithmetic
// (integer hashing, float64 IEEE division, multiplication and addition in the
// same order; --fmad=false), so ids and tw equal the CPU's bit for bit:
//   uniform: the partial Fisher-Yates shuffle of 0..E-1, kept as the (at most
//            2K) positions it moved; slot j takes position j + floor(u * (E - j)).
//   skewed:  the first free e whose running sum of 1/(e+1) over the free
//            experts exceeds u * (their total), the last free one should
//            rounding leave it unreached.
//   tw:      (0.5 + u01(seed ^ 0x7477, t*K + j)) / (their sum over j).
// Needs 1 <= K <= 32, K <= E <= 1024 (checked by the caller). Block 256, any
// grid covering T.
#define GEN_ROUTE_MAX_K 32
#define GEN_ROUTE_MAX_E 1024

__device__ __forceinline__ double gen_u01_key(gen_u64 key, gen_u64 i) {
    return (double)(gen_bits(key, i) >> 11) * 0x1.0p-53;
}

extern "C" __global__ void __launch_bounds__(256)
nvfp4_gen_routing(gen_u64 seed, int T, int E, int K, int skewed, int *ids, float *tw) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= T) return;
    const gen_u64 key = gen_key(seed), wkey = gen_key(seed ^ 0x7477ull);
    const gen_u64 base = (gen_u64)t * (gen_u64)K;
    int *id = ids + base;
    if (!skewed) {
        int pos[2 * GEN_ROUTE_MAX_K], val[2 * GEN_ROUTE_MAX_K], moved = 0;   // perm[pos[i]] = val[i]; else perm[p] = p
        for (int j = 0; j < K; j++) {
            double u = gen_u01_key(key, base + (gen_u64)j);
            int r = j + (int)(u * (E - j));
            int vj = j, vr = r, ij = -1, ir = -1;
            for (int i = 0; i < moved; i++) {
                if (pos[i] == j) { vj = val[i]; ij = i; }
                if (pos[i] == r) { vr = val[i]; ir = i; }
            }
            // swap perm[j] and perm[r]
            if (ij < 0) { ij = moved++; pos[ij] = j; }
            if (ir < 0 && r != j) { ir = moved++; pos[ir] = r; }
            if (r == j) ir = ij;
            val[ij] = vr;
            val[ir] = vj;
            id[j] = val[ij];
        }
    } else {
        unsigned long long taken[GEN_ROUTE_MAX_E / 64];
        for (int w = 0; w < (E + 63) / 64; w++) taken[w] = 0;
        for (int j = 0; j < K; j++) {
            double u = gen_u01_key(key, base + (gen_u64)j);
            double total = 0.0, run = 0.0;
            int pick = -1;
            for (int e = 0; e < E; e++)
                if (!((taken[e >> 6] >> (e & 63)) & 1)) total += 1.0 / (double)(e + 1);
            for (int e = 0; e < E; e++) {
                if ((taken[e >> 6] >> (e & 63)) & 1) continue;
                pick = e;
                run += 1.0 / (double)(e + 1);
                if (run > u * total) break;
            }
            taken[pick >> 6] |= 1ull << (pick & 63);
            id[j] = pick;
        }
    }
    double sum = 0.0;
    for (int j = 0; j < K; j++) sum += 0.5 + gen_u01_key(wkey, base + (gen_u64)j);
    for (int j = 0; j < K; j++) tw[base + j] = (float)((0.5 + gen_u01_key(wkey, base + (gen_u64)j)) / sum);
}
