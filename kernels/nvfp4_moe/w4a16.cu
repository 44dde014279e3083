// w4a16.cu: the tunable NVFP4 weight-only MoE layer (routed experts) for
// Hopper. Same inputs, outputs and layouts as ref.cu and nvfp4_ref.c: x bf16
// [T, H]; ids int32 [T, K]; tw f32 [T, K]; w13 NVFP4 [E, 2I, H] (rows 0..I-1
// gate, I..2I-1 up), w2 NVFP4 [E, H, I]; scales e4m3 in the linear
// [rows, cols/16] layout; one s2 per expert; out bf16 [T, H].
//
// Four kernels, in order on one stream (all of them timed):
//   w4_align    one block: counts (token, slot) pairs per expert, sorts them
//               by expert into `pairs`, and cuts each expert's pairs into
//               tiles of TT = 8 * NT tokens: tiles[] = { expert, first, count }.
//   w4_up       persistent: for every (tile, block of 16 * UP_RW rows of I),
//               gate and up GEMMs on the tile's tokens, SiLU-and-mul rounded to
//               bf16 into h [pairs in sorted order, I].
//   w4_down     persistent: for every (tile, block of 16 * DN_RW rows of H),
//               the down GEMM into y f32 [pair, H] (unweighted).
//   w4_combine  out[t][n] = bf16(sum over the k slots, in order, of tw * y):
//               deterministic, no atomics.
//
// The GEMMs are mma.sync m16n8k16 bf16 with fp32 accumulation, weights as the
// A operand (16 rows) and tokens as B (8 per n-tile): at small T a tile is
// mostly weights, so the weight stream sets the time. Each warp streams its
// rows (WS = 0: straight from global memory into registers, 16 bytes per lane
// per row per 128-element chunk, no L1 allocation; WS = 2: through a cp.async
// ring in shared memory, below) and dequantises them in registers:
//   - e2m1 -> bf16 with bit operations: (v & 0x80008000) | ((v >> 6) & 0x01C001C0)
//     on the nibble moved to the top of each half gives e2m1 * 2^-126;
//   - one fma.rn.bf16x2 by (block scale * 2^118) gives e2m1 * scale * 2^-8,
//     exact in bf16 (at most 5 significant bits, far from over- and underflow);
//   - s2 * 2^8 is applied to the fp32 accumulator at the end.
// A k16 step takes the 16 elements its lanes hold in any order, as long as A
// and B agree: lane q of a row group takes elements 32q..32q+31 of each chunk,
// and a bf16 pair holds elements (p, p + 4) of an 8-element word so that the
// decode needs no byte shuffles (B pairs the activations the same way with
// one prmt each).
//
// Tunables (defines):
//   NT      n8 token tiles per work item (tile of up to 8 * NT tokens; only
//           the n8 tiles holding tokens are multiplied)                 1, 2, 4
//   UP_RW   warps across rows in w4_up (16 gate + 16 up rows each)     1, 2, 4
//   UP_KW   warps across K (split-K inside the block, reduced in shared memory)
//   DN_RW, DN_KW   the same for w4_down
//   PF      chunks of weights loaded ahead (1 or 2; WS = 0)
//   L_NT, L_UP_RW, L_DN_RW, L_KW   the large-batch instance (w4_up_l, w4_down_l)
//   L2PF    L2 prefetch size of the weight loads: 0, 128, 256 bytes
//   MINB    blocks an SM must hold (launch bounds) of w4_up and w4_down, WS = 0
//   L_MINB  the same for w4_up_l and w4_down_l
//   WS      where the weights travel: 0 into registers; 2 through a per-warp
//           cp.async ring of one-chunk stages in shared memory (1 and 3, bulk
//           copies and row-contiguous copies into stages of several chunks,
//           measured slower at every shape and were removed: docs/perf.md)
//   WS_S    stages a warp (WS = 2)
//   WL      the weight layout the kernels read: 0 linear (w13q/w13sf, w2q/w2sf:
//           a warp's load covers 8 rows x 64 bytes); 1 fragment-major
//           (w13pq/w13psf, w2pq/w2psf, gen.cu's nvfp4_pack: a warp's code load
//           is 512 contiguous bytes, its scale load 128, and a warp walks its
//           16-row slab front to back)
//   NOMMA   1: no arithmetic, wrong results (tests/gpu/nvfp4_stream.lua only)
// Requirements: H % 128 == 0, I % 128 == 0, I % (16 * UP_RW) == 0,
// H % (16 * DN_RW) == 0, E <= 1024; x, h 16-byte aligned. Expert ids outside
// 0..E-1 are dropped (the reference makes NaN of them; the recipe's inputs
// have none).
//
// Launch plan: see recipes/nvfp4_moe.lua (grid of the persistent kernels:
// a few blocks per SM; scratch: pairs, tiles, meta, h, y).
// Compile check: nvcc -arch=sm_90 -cubin -o /tmp/w4.cubin kernels/nvfp4_moe/w4a16.cu

#ifndef NT
#define NT 1
#endif
#ifndef UP_RW
#define UP_RW 2
#endif
#ifndef UP_KW
#define UP_KW 2
#endif
#ifndef DN_RW
#define DN_RW 2
#endif
#ifndef DN_KW
#define DN_KW 2
#endif
#ifndef PF
#define PF 1
#endif
#ifndef L_NT
#define L_NT 2
#endif
#ifndef L_UP_RW
#define L_UP_RW 4
#endif
#ifndef L_DN_RW
#define L_DN_RW 2
#endif
#ifndef L_KW
#define L_KW 1
#endif
#ifndef L2PF
#define L2PF 128
#endif
#ifndef MINB
#define MINB 1
#endif
#ifndef L_MINB
#define L_MINB 1
#endif
#ifndef WS
#define WS 0
#endif
#ifndef NOMMA
#define NOMMA 0
#endif
#ifndef WS_S
#define WS_S 2
#endif
#ifndef WL
#define WL 0
#endif

typedef unsigned int u32;
typedef unsigned short u16;

// ---- small device helpers --------------------------------------------------

// The L2 prefetch qualifier of every weight load (L2PF): the L2 fetches the
// whole aligned 128- or 256-byte block around a load from DRAM, so the next
// chunks of the same row then hit L2.
#if L2PF == 256
#define L2PF_Q ".L2::256B"
#elif L2PF == 128
#define L2PF_Q ".L2::128B"
#else
#define L2PF_Q ""
#endif

// A weight load: read once, so no L1 allocation.
__device__ __forceinline__ uint4 ld_stream(const unsigned char *p) {
    uint4 v;
    asm("ld.global.nc.L1::no_allocate" L2PF_Q ".v4.u32 {%0, %1, %2, %3}, [%4];"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}

__device__ __forceinline__ u32 ld_u16(const unsigned char *p) {
    return *(const unsigned short *)p;
}

__device__ __forceinline__ u32 ld_u32(const unsigned char *p) {
    return *(const u32 *)p;
}

__device__ __forceinline__ u32 prmt(u32 a, u32 b, u32 sel) {
    u32 d;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
    return d;
}

__device__ __forceinline__ u32 bf16x2_mul(u32 a, u32 b) {
    u32 d;
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(0x80008000u));
    return d;
}

// Two e4m3 block scales (low byte first) -> { s0, s0 } and { s1, s1 } as
// bf16x2, each times 2^118 (exact: e4m3 has 3 mantissa bits, and 448 * 2^118
// is below the bf16 maximum).
__device__ __forceinline__ void scales2(u32 two, u32 &lo, u32 &hi) {
    u32 h2;
    asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h2) : "h"((unsigned short)two));
    float f0, f1;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f0) : "h"((unsigned short)(h2 & 0xffffu)));
    asm("cvt.f32.f16 %0, %1;" : "=f"(f1) : "h"((unsigned short)(h2 >> 16)));
    f0 *= 3.3230699894622896e35f;   // 2^118
    f1 *= 3.3230699894622896e35f;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(lo) : "f"(f0), "f"(f0));
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(hi) : "f"(f1), "f"(f1));
}

// Eight e2m1 codes (element j in bits 4j..4j+3) -> four bf16x2 pairs
// (element p, element p + 4), p = 0..3, each times the scale pair s.
__device__ __forceinline__ void dequant8(u32 w, u32 s, u32 *o) {
    o[0] = bf16x2_mul(((w << 12) & 0x80008000u) | ((w << 6) & 0x01C001C0u), s);
    o[1] = bf16x2_mul(((w << 8) & 0x80008000u) | ((w << 2) & 0x01C001C0u), s);
    o[2] = bf16x2_mul(((w << 4) & 0x80008000u) | ((w >> 2) & 0x01C001C0u), s);
    o[3] = bf16x2_mul((w & 0x80008000u) | ((w >> 6) & 0x01C001C0u), s);
}

// Eight bf16 activations (element j in the j-th half) -> the same pairs.
__device__ __forceinline__ void pair8(uint4 a, u32 *o) {
    o[0] = prmt(a.x, a.z, 0x5410u);
    o[1] = prmt(a.x, a.z, 0x7632u);
    o[2] = prmt(a.y, a.w, 0x5410u);
    o[3] = prmt(a.y, a.w, 0x7632u);
}

__device__ __forceinline__ void mma(float *c, u32 a0, u32 a1, u32 a2, u32 a3, u32 b0, u32 b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ u16 f32_to_bf16(float f) {
    u32 u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (u16)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (u16)(u >> 16);
}

// One 128-element chunk of one row pair (rows g and g + 8 of a 16-row group).
struct RowChunk {
    uint4 q0, q1;     // codes of rows g and g + 8: elements 32q..32q+31
    u32 s0, s1;       // their two block scales (e4m3 pairs)
};

// Chunk c of a lane's row pair. WL = 0: q0, q1 and s0, s1 point at rows g and
// g + 8 (the lane's column); WL = 1: q0 and q0 + 512 at the lane's two code
// pieces of chunk 0 in its slab, s0 at its 4 scale bytes (s1 unused).
template <int Wl>
__device__ __forceinline__ void load_chunk(RowChunk &r, const unsigned char *q0, const unsigned char *q1,
                                           const unsigned char *s0, const unsigned char *s1, int c) {
    if constexpr (Wl == 1) {
        r.q0 = ld_stream(q0 + 1024 * c);
        r.q1 = ld_stream(q0 + 1024 * c + 512);
        const u32 s = ld_u32(s0 + 128 * c);
        r.s0 = s & 0xffffu;
        r.s1 = s >> 16;
    } else {
        r.q0 = ld_stream(q0 + 64 * c);
        r.q1 = ld_stream(q1 + 64 * c);
        r.s0 = ld_u16(s0 + 8 * c);
        r.s1 = ld_u16(s1 + 8 * c);
    }
}

// acc[r][j] += rows of chunk r[r] x the tokens of n8 tile j, over one chunk
// c, for the nsub n8 tiles (of Nt) that hold tokens. rows[j]: row g of token
// tile j (an x row or an h row; a tile's missing tokens point at a real row
// and their columns are never stored).
// act[j]: the lane's four activation words of tile j, word w at act[j][AS * w].
// Does n8 tile j of a work item hold tokens? (Tile 0 always does.)
__device__ __forceinline__ bool tile_used(int j, int nsub) { return j == 0 || j < nsub; }

template <int Nt, int NR, int AS>
__device__ __forceinline__ void chunk_mma(float (*acc)[Nt][4], const RowChunk *r, const uint4 *const *act,
                                          int nsub) {
#if NOMMA
    // A diagnostic only (tests/gpu/nvfp4_stream.lua): every load of the chunk,
    // none of the arithmetic, to time how fast a streaming mode can move the
    // weights. The results are wrong, and the check refuses them.
    u32 v = 0;
#pragma unroll
    for (int k = 0; k < NR; k++)
        v ^= r[k].q0.x ^ r[k].q0.y ^ r[k].q0.z ^ r[k].q0.w ^ r[k].q1.x ^ r[k].q1.y ^ r[k].q1.z ^ r[k].q1.w ^ r[k].s0 ^
             r[k].s1;
#pragma unroll
    for (int j = 0; j < Nt; j++)
        if (tile_used(j, nsub))
#pragma unroll
            for (int w = 0; w < 4; w++) {
                const uint4 a = act[j][AS * w];
                v ^= a.x ^ a.y ^ a.z ^ a.w;
            }
    acc[0][0][0] += __uint_as_float(v & 0x007fffffu);
#else
    u32 lo[NR][2], hi[NR][2];
#pragma unroll
    for (int k = 0; k < NR; k++) {
        scales2(r[k].s0, lo[k][0], hi[k][0]);
        scales2(r[k].s1, lo[k][1], hi[k][1]);
    }
#pragma unroll
    for (int w = 0; w < 4; w++) {
        u32 a[NR][2][4];
#pragma unroll
        for (int k = 0; k < NR; k++) {
            const u32 w0 = w == 0 ? r[k].q0.x : w == 1 ? r[k].q0.y : w == 2 ? r[k].q0.z : r[k].q0.w;
            const u32 w1 = w == 0 ? r[k].q1.x : w == 1 ? r[k].q1.y : w == 2 ? r[k].q1.z : r[k].q1.w;
            dequant8(w0, w < 2 ? lo[k][0] : hi[k][0], a[k][0]);
            dequant8(w1, w < 2 ? lo[k][1] : hi[k][1], a[k][1]);
        }
#pragma unroll
        for (int j = 0; j < Nt; j++) {
            if (!tile_used(j, nsub)) break;
            u32 b[4];
            pair8(act[j][AS * w], b);
#pragma unroll
            for (int k = 0; k < NR; k++) {
                mma(acc[k][j], a[k][0][0], a[k][1][0], a[k][0][1], a[k][1][1], b[0], b[1]);
                mma(acc[k][j], a[k][0][2], a[k][1][2], a[k][0][3], a[k][1][3], b[2], b[3]);
            }
        }
    }
#endif
}

// The same with the activations read straight from global memory: rows[j] is
// row g of token tile j, chunk c.
template <int Nt, int NR>
__device__ __forceinline__ void chunk_mma(float (*acc)[Nt][4], const RowChunk *r, const u16 *const *rows,
                                          int c, int q, int nsub) {
    const uint4 *act[Nt];
#pragma unroll
    for (int j = 0; j < Nt; j++) act[j] = (const uint4 *)(rows[j] + 128 * c + 32 * q);
    chunk_mma<Nt, NR, 1>(acc, r, act, nsub);
}

// ---- shared-memory copies (WS == 2) ----------------------------------------------

__device__ __forceinline__ u32 smem_u32(const void *p) { return (u32)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void cp8_g2s(u32 dst, const void *src) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(dst), "l"(src) : "memory");
}

__device__ __forceinline__ void cp4_g2s(u32 dst, const void *src) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(dst), "l"(src) : "memory");
}

__device__ __forceinline__ void cp16_a(u32 dst, const void *src) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
}

// ---- everything a chunk needs through a cp.async ring (WS == 2) -------------------
//
// A warp keeps WS_S stages of one 128-element chunk each in shared memory: its
// weight codes (each lane's own 16 bytes a row, as the register path loads
// them), its activations (each lane's own four 16-byte words a token tile)
// and the 8 scale bytes of each row (copied by lane q == 0 of the row; with
// WL = 1 each lane copies its own 4 scale bytes of the group). All of
// it goes by cp.async, so no load holds a register scoreboard: a warp waits
// only at cp.async.wait_group for the chunk it is about to use, WS_S - 1
// chunks behind the newest copy. (Loads into registers share one scoreboard
// in ptxas's code for the loops above, so the first use of a chunk there also
// waits for the prefetch of the next.)

template <int Nt, int NR>
struct CpLayout {
    enum : int {
        W = NR * 2 * 32 * 16,          // codes: (row group k, half h, lane) -> 16 bytes
        A = Nt * 4 * 32 * 16,          // activations: (tile j, word w, lane) -> 16 bytes
        S = NR * 16 * 8,               // scales: (row group k, row r) -> 8 bytes
        STAGE = W + A + S,
    };
};

__device__ __forceinline__ void cp16_w(u32 dst, const void *src) {
    asm volatile("cp.async.cg.shared.global" L2PF_Q " [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
}

__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }

template <int N>
__device__ __forceinline__ void cp_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }

// acc += the warp's NR row groups x the token tiles over the chunks c0..c1-1.
// WL = 0: wq[k]: codes of the lane's row g of group k at its 16-byte column
// (16 * q), row g + 8 is 8 * rowb further; wsf[k]: the scales of row g of
// group k. WL = 1: wq[k] and wsf[k] point at the lane's code piece and scale
// word of chunk 0 in group k's slab (rowb and sfb unused).
template <int Nt, int NR, int D, int Wl>
__device__ __forceinline__ void stream_cp(float (*acc)[Nt][4], unsigned char *sm, const unsigned char *const *wq,
                                          const unsigned char *const *wsf, long long rowb, long long sfb, int c0,
                                          int c1, const u16 *const *rows, int lane, int g, int q, int nsub) {
    typedef CpLayout<Nt, NR> L;
    const u32 sm0 = smem_u32(sm);
    auto issue = [&](int c) {
        if (c < c1) {
            const u32 st = sm0 + ((c - c0) % D) * L::STAGE;
#pragma unroll
            for (int k = 0; k < NR; k++) {
                if constexpr (Wl == 1) {
                    cp16_w(st + ((2 * k) * 32 + lane) * 16, wq[k] + 1024 * c);
                    cp16_w(st + ((2 * k + 1) * 32 + lane) * 16, wq[k] + 1024 * c + 512);
                } else {
                    cp16_w(st + ((2 * k) * 32 + lane) * 16, wq[k] + 64 * c);
                    cp16_w(st + ((2 * k + 1) * 32 + lane) * 16, wq[k] + 8 * rowb + 64 * c);
                }
            }
#pragma unroll
            for (int j = 0; j < Nt; j++)
                if (tile_used(j, nsub))
#pragma unroll
                    for (int w = 0; w < 4; w++)
                        cp16_a(st + L::W + ((4 * j + w) * 32 + lane) * 16, rows[j] + 128 * c + 32 * q + 8 * w);
            if constexpr (Wl == 1) {
#pragma unroll
                for (int k = 0; k < NR; k++) cp4_g2s(st + L::W + L::A + (32 * k + lane) * 4, wsf[k] + 128 * c);
            } else if (q == 0) {
#pragma unroll
                for (int k = 0; k < NR; k++) {
                    cp8_g2s(st + L::W + L::A + (16 * k + g) * 8, wsf[k] + 8 * c);
                    cp8_g2s(st + L::W + L::A + (16 * k + g + 8) * 8, wsf[k] + 8 * sfb + 8 * c);
                }
            }
        }
        cp_commit();   // an empty group past c1 keeps the count of groups uniform
    };
#pragma unroll
    for (int i = 0; i < D - 1; i++) issue(c0 + i);
    for (int c = c0; c < c1; c++) {
        __syncwarp();              // every lane is done with the stage the next copy refills
        issue(c + D - 1);
        cp_wait<D - 1>();          // this lane's copies of chunk c are in
        __syncwarp();              // and so are the scale bytes other lanes copied
        const unsigned char *st = sm + ((c - c0) % D) * L::STAGE;
        RowChunk rc[NR];
#pragma unroll
        for (int k = 0; k < NR; k++) {
            rc[k].q0 = *(const uint4 *)(st + ((2 * k) * 32 + lane) * 16);
            rc[k].q1 = *(const uint4 *)(st + ((2 * k + 1) * 32 + lane) * 16);
            if constexpr (Wl == 1) {
                const u32 sw = *(const u32 *)(st + L::W + L::A + (32 * k + lane) * 4);
                rc[k].s0 = sw & 0xffffu;
                rc[k].s1 = sw >> 16;
            } else {
                rc[k].s0 = *(const u16 *)(st + L::W + L::A + (16 * k + g) * 8 + 2 * q);
                rc[k].s1 = *(const u16 *)(st + L::W + L::A + (16 * k + g + 8) * 8 + 2 * q);
            }
        }
        const uint4 *act[Nt];
#pragma unroll
        for (int j = 0; j < Nt; j++) act[j] = (const uint4 *)(st + L::W) + 4 * j * 32 + lane;
        chunk_mma<Nt, NR, 32>(acc, rc, act, nsub);
    }
    cp_wait<0>();
}

// Sum the split-K partial accumulators of the warps kw > 0 into kw == 0's.
template <int Rw, int Kw, int NACC>
__device__ __forceinline__ void reduce_k(float *acc, float *red, int rw, int kw, int lane) {
    if (Kw == 1) return;
    if (kw > 0) {
        float *dst = red + (((kw - 1) * Rw + rw) * 32 + lane) * NACC;
#pragma unroll
        for (int i = 0; i < NACC; i++) dst[i] = acc[i];
    }
    __syncthreads();
    if (kw == 0) {
        for (int k = 1; k < Kw; k++) {
            const float *src = red + (((k - 1) * Rw + rw) * 32 + lane) * NACC;
#pragma unroll
            for (int i = 0; i < NACC; i++) acc[i] += src[i];
        }
    }
    __syncthreads();
}

// ---- w4_align ----------------------------------------------------------------

// Inclusive sum over the block (blockDim.x == 1024) of v; warp totals in ws[32].
__device__ __forceinline__ int block_scan(int v, int *ws) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int o = 1; o < 32; o <<= 1) {
        int n = __shfl_up_sync(0xffffffffu, v, o);
        if (lane >= o) v += n;
    }
    if (lane == 31) ws[warp] = v;
    __syncthreads();
    if (warp == 0) {
        int s = ws[lane];
        for (int o = 1; o < 32; o <<= 1) {
            int n = __shfl_up_sync(0xffffffffu, s, o);
            if (lane >= o) s += n;
        }
        ws[lane] = s;
    }
    __syncthreads();
    int r = v + (warp > 0 ? ws[warp - 1] : 0);
    __syncthreads();
    return r;
}

// tt: tokens a tile (8 * NT of the kernels that follow).
extern "C" __global__ void __launch_bounds__(1024)
w4_align(int T, int K, int E, int tt, const int *ids, int *pairs, int4 *tiles, int *meta) {
    __shared__ int cnt[1024], cur[1024], ws[32];
    int tid = threadIdx.x, n = T * K;
    cnt[tid] = 0;
    __syncthreads();
    for (int i = tid; i < n; i += 1024) {
        int e = ids[i];
        if ((unsigned)e < (unsigned)E) atomicAdd(&cnt[e], 1);
    }
    __syncthreads();
    int c = tid < E ? cnt[tid] : 0;
    int nt = (c + tt - 1) / tt;
    int off = block_scan(c, ws) - c;
    int toff = block_scan(nt, ws) - nt;
    if (tid == 1023) meta[0] = toff + nt;
    cur[tid] = off;
    __syncthreads();
    for (int i = tid; i < n; i += 1024) {
        int e = ids[i];
        if ((unsigned)e < (unsigned)E) pairs[atomicAdd(&cur[e], 1)] = i;
    }
    for (int j = 0; j < nt; j++) tiles[toff + j] = make_int4(tid, off + j * tt, min(tt, c - j * tt), 0);
}

// ---- the up projection -------------------------------------------------------------

template <int Nt, int Rw, int Kw, int Pf, int Ws>
__device__ __forceinline__ void up_body(int H, int I, int K, const u16 *x, const int *pairs,
                                        const int4 *tiles, const int *meta, const unsigned char *w13q,
                                        const unsigned char *w13sf, const float *w13s2, u16 *h) {
    __shared__ float red[Kw > 1 ? (Kw - 1) * Rw * 32 * 2 * Nt * 4 : 1];
    extern __shared__ __align__(128) unsigned char dsm[];
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
    unsigned char *csm = dsm + warp * WS_S * CpLayout<Nt, 2>::STAGE;
    int rw = warp % Rw, kw = warp / Rw;
    int ntiles = meta[0];
    int rblocks = I / (16 * Rw);
    int chunks = H / 128;
    int c0 = chunks * kw / Kw, c1 = chunks * (kw + 1) / Kw;
    long long rowb = H / 2, sfb = H / 16;
    for (long long wi = blockIdx.x; wi < (long long)ntiles * rblocks; wi += gridDim.x) {
        int tile = (int)(wi % ntiles), rb = (int)(wi / ntiles);
        int4 tl = tiles[tile];
        int e = tl.x, first = tl.y, count = tl.z, nsub = (count + 7) >> 3;
        int i0 = (rb * Rw + rw) * 16;
        long long grow = (long long)e * 2 * I + i0 + g;           // gate row g; up row is + I
        // WL = 0: the lane's rows g and g + 8; WL = 1: its pieces of the 16-row slab
        const long long slab = grow - g;
        const unsigned char *qg0 = WL ? w13q + slab * rowb + 16 * lane : w13q + grow * rowb + 16 * q,
                            *qg1 = qg0 + 8 * rowb;
        const unsigned char *qu0 = qg0 + (long long)I * rowb, *qu1 = qu0 + 8 * rowb;
        const unsigned char *sg0 = WL ? w13sf + slab * sfb + 4 * lane : w13sf + grow * sfb + 2 * q,
                            *sg1 = sg0 + 8 * sfb;
        const unsigned char *su0 = sg0 + (long long)I * sfb, *su1 = su0 + 8 * sfb;
        const u16 *rows[Nt];
#pragma unroll
        for (int j = 0; j < Nt; j++)
            rows[j] = x + (long long)(pairs[first + min(8 * j + g, count - 1)] / K) * H;
        float acc[2][Nt][4];
#pragma unroll
        for (int k = 0; k < 2; k++)
#pragma unroll
            for (int j = 0; j < Nt; j++) acc[k][j][0] = acc[k][j][1] = acc[k][j][2] = acc[k][j][3] = 0.0f;
        if constexpr (Ws == 2) {
            const unsigned char *wq[2] = {qg0, qu0};
            const unsigned char *wsf[2] = {WL ? sg0 : w13sf + grow * sfb, WL ? su0 : w13sf + (grow + I) * sfb};
            stream_cp<Nt, 2, WS_S, WL>(acc, csm, wq, wsf, rowb, sfb, c0, c1, rows, lane, g, q, nsub);
        } else {
        RowChunk rc[Pf][2];
#pragma unroll
        for (int p = 0; p < Pf; p++)
            if (c0 + p < c1) {
                load_chunk<WL>(rc[p][0], qg0, qg1, sg0, sg1, c0 + p);
                load_chunk<WL>(rc[p][1], qu0, qu1, su0, su1, c0 + p);
            }
        for (int c = c0; c < c1; c += Pf) {
#pragma unroll
            for (int p = 0; p < Pf; p++) {
                if (c + p < c1) {
                    RowChunk cur[2] = {rc[p][0], rc[p][1]};
                    if (c + p + Pf < c1) {
                        load_chunk<WL>(rc[p][0], qg0, qg1, sg0, sg1, c + p + Pf);
                        load_chunk<WL>(rc[p][1], qu0, qu1, su0, su1, c + p + Pf);
                    }
                    chunk_mma<Nt, 2>(acc, cur, rows, c + p, q, nsub);
                }
            }
        }
        }
        reduce_k<Rw, Kw, 2 * Nt * 4>(&acc[0][0][0], red, rw, kw, lane);
        if (kw == 0) {
            float s2 = w13s2[e] * 256.0f;    // 2^8 undoes the scale fold
#pragma unroll
            for (int j = 0; j < Nt; j++)
#pragma unroll
                for (int c = 0; c < 4; c++) {
                    int tok = 8 * j + 2 * q + (c & 1);
                    if (tok < count) {
                        float gv = acc[0][j][c] * s2, uv = acc[1][j][c] * s2;
                        float hv = __fdividef(gv, 1.0f + __expf(-gv)) * uv;
                        h[(long long)(first + tok) * I + i0 + g + (c >> 1) * 8] = f32_to_bf16(hv);
                    }
                }
        }
    }
}

// ---- the down projection -----------------------------------------------------------

template <int Nt, int Rw, int Kw, int Pf, int Ws>
__device__ __forceinline__ void down_body(int H, int I, const int *pairs, const int4 *tiles, const int *meta,
                                          const u16 *h, const unsigned char *w2q, const unsigned char *w2sf,
                                          const float *w2s2, float *y) {
    __shared__ float red[Kw > 1 ? (Kw - 1) * Rw * 32 * Nt * 4 : 1];
    extern __shared__ __align__(128) unsigned char dsm[];
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
    unsigned char *csm = dsm + warp * WS_S * CpLayout<Nt, 1>::STAGE;
    int rw = warp % Rw, kw = warp / Rw;
    int ntiles = meta[0];
    int rblocks = H / (16 * Rw);
    int chunks = I / 128;
    int c0 = chunks * kw / Kw, c1 = chunks * (kw + 1) / Kw;
    long long rowb = I / 2, sfb = I / 16;
    for (long long wi = blockIdx.x; wi < (long long)ntiles * rblocks; wi += gridDim.x) {
        int tile = (int)(wi % ntiles), rb = (int)(wi / ntiles);
        int4 tl = tiles[tile];
        int e = tl.x, first = tl.y, count = tl.z, nsub = (count + 7) >> 3;
        int n0 = (rb * Rw + rw) * 16;
        long long grow = (long long)e * H + n0 + g, slab = grow - g;
        const unsigned char *q0 = WL ? w2q + slab * rowb + 16 * lane : w2q + grow * rowb + 16 * q,
                            *q1 = q0 + 8 * rowb;
        const unsigned char *s0 = WL ? w2sf + slab * sfb + 4 * lane : w2sf + grow * sfb + 2 * q, *s1 = s0 + 8 * sfb;
        const u16 *rows[Nt];
#pragma unroll
        for (int j = 0; j < Nt; j++) rows[j] = h + (long long)(first + min(8 * j + g, count - 1)) * I;
        float acc[1][Nt][4];
#pragma unroll
        for (int j = 0; j < Nt; j++) acc[0][j][0] = acc[0][j][1] = acc[0][j][2] = acc[0][j][3] = 0.0f;
        if constexpr (Ws == 2) {
            const unsigned char *wq[1] = {q0}, *wsf[1] = {WL ? s0 : w2sf + grow * sfb};
            stream_cp<Nt, 1, WS_S, WL>(acc, csm, wq, wsf, rowb, sfb, c0, c1, rows, lane, g, q, nsub);
        } else {
        RowChunk rc[Pf];
#pragma unroll
        for (int p = 0; p < Pf; p++)
            if (c0 + p < c1) load_chunk<WL>(rc[p], q0, q1, s0, s1, c0 + p);
        for (int c = c0; c < c1; c += Pf) {
#pragma unroll
            for (int p = 0; p < Pf; p++) {
                if (c + p < c1) {
                    RowChunk cur = rc[p];
                    if (c + p + Pf < c1) load_chunk<WL>(rc[p], q0, q1, s0, s1, c + p + Pf);
                    chunk_mma<Nt, 1>(acc, &cur, rows, c + p, q, nsub);
                }
            }
        }
        }
        reduce_k<Rw, Kw, Nt * 4>(&acc[0][0][0], red, rw, kw, lane);
        if (kw == 0) {
            float s2 = w2s2[e] * 256.0f;
#pragma unroll
            for (int j = 0; j < Nt; j++)
#pragma unroll
                for (int c = 0; c < 4; c++) {
                    int tok = 8 * j + 2 * q + (c & 1);
                    if (tok < count)
                        y[(long long)pairs[first + tok] * H + n0 + g + (c >> 1) * 8] = acc[0][j][c] * s2;
                }
        }
    }
}

// ---- the kernels: a small-batch and a large-batch instance of each GEMM ----------

#define UP_ARGS int T, int H, int I, int E, int K, const u16 *x, const int *pairs, const int4 *tiles, \
    const int *meta, const unsigned char *w13q, const unsigned char *w13sf, const float *w13s2, u16 *h
#define DN_ARGS int T, int H, int I, int E, int K, const int *pairs, const int4 *tiles, const int *meta, \
    const u16 *h, const unsigned char *w2q, const unsigned char *w2sf, const float *w2s2, float *y

// Blocks an SM holds (launch bounds): with WS, as many as shared memory lets
// (228 KB an SM, 1 KB reserved a block, the split-K buffer `red` included),
// at most 2048 threads; without, MINB (L_MINB). recipes/nvfp4_moe.lua sizes the grids
// of the WS kernels by the same rule.
__host__ __device__ constexpr int ws_blocks(int threads, int bytes) {
    return 233472 / (bytes + 1024) < 2048 / threads ? 233472 / (bytes + 1024) : 2048 / threads;
}
__host__ __device__ constexpr int red_bytes(int rw, int kw, int nr, int nt) {
    return 4 * (kw > 1 ? (kw - 1) * rw * 32 * nr * nt * 4 : 1);
}
#define WS_BYTES(RW, KW, NR, NTT) (RW * KW * WS_S * CpLayout<NTT, NR>::STAGE)
#define WS_BLOCKS(RW, KW, NR, NTT) \
    ws_blocks(RW * KW * 32, WS_BYTES(RW, KW, NR, NTT) + red_bytes(RW, KW, NR, NTT))

extern "C" __global__ void __launch_bounds__(UP_RW * UP_KW * 32, WS ? WS_BLOCKS(UP_RW, UP_KW, 2, NT) : MINB)
w4_up(UP_ARGS) {
    up_body<NT, UP_RW, UP_KW, PF, WS>(H, I, K, x, pairs, tiles, meta, w13q, w13sf, w13s2, h);
}
extern "C" __global__ void __launch_bounds__(L_UP_RW * L_KW * 32, WS ? WS_BLOCKS(L_UP_RW, L_KW, 2, L_NT) : L_MINB)
w4_up_l(UP_ARGS) {
    up_body<L_NT, L_UP_RW, L_KW, PF, WS>(H, I, K, x, pairs, tiles, meta, w13q, w13sf, w13s2, h);
}
extern "C" __global__ void __launch_bounds__(DN_RW * DN_KW * 32, WS ? WS_BLOCKS(DN_RW, DN_KW, 1, NT) : MINB)
w4_down(DN_ARGS) {
    down_body<NT, DN_RW, DN_KW, PF, WS>(H, I, pairs, tiles, meta, h, w2q, w2sf, w2s2, y);
}
extern "C" __global__ void __launch_bounds__(L_DN_RW * L_KW * 32, WS ? WS_BLOCKS(L_DN_RW, L_KW, 1, L_NT) : L_MINB)
w4_down_l(DN_ARGS) {
    down_body<L_NT, L_DN_RW, L_KW, PF, WS>(H, I, pairs, tiles, meta, h, w2q, w2sf, w2s2, y);
}

// ---- the large-batch GEMMs on wgmma (LW = 1; sm_90a) ------------------------------
//
// w4_up_wg and w4_down_wg take tiles of 64 * L_WG tokens (w4_align's tt) and
// 128 weight rows: a block of L_WG warpgroups, each the A operand of its 64
// tokens, all sharing B, the weights of the work item dequantised once into
// shared memory as bf16. The K loop goes 64 elements (128 bytes of bf16) at
// a time through WG_STAGES stages of shared memory, both operands in the
// 128-byte swizzled K-major layout wgmma reads (row r's 16-byte piece p at
// r * 128 + ((p ^ (r & 7)) << 4), in 1024-byte aligned atoms of 8 rows):
//   - the activations by cp.async, 16 bytes a thread, each warpgroup its own 64
//     rows (so its wgmma.wait_group alone frees them for the next copy);
//   - the codes and block scales by plain loads into registers one chunk
//     ahead, dequantised by every thread of the block into the stage (e2m1 to
//     bf16 with bit operations, times the block scale by one fma.bf16x2, as in
//     the register path but in element order), then fence.proxy.async so the
//     tensor cores (the async proxy) see the stores;
//   - one __syncthreads a chunk; the wgmma of chunk c (4 x m64n128k16) runs
//     while the threads dequantise chunk c + 1 and copy the activations of
//     c + 2. Stage (c + 1) % 3 was last read by chunk c - 2, which every
//     warpgroup waited for (wait_group 1 after issuing c - 1) before it
//     reached chunk c's barrier.
// w4_up_wg: B rows 0..63 are gate rows i0.., rows 64..127 the up rows of the
// same i, so a thread holds gate and up of one h element in accumulators j
// and j + 32 (accumulator i of a thread: row 16 * warp + lane / 4 + 8 * (i / 2
// % 2), column 8 * (i / 4) + 2 * (lane % 4) + i % 2).

#ifndef LW
#define LW 0
#endif
#ifndef L_WG
#define L_WG 2
#endif
#define WG_STAGES 3
#define WG_BM (64 * L_WG)                            // tokens a tile
#define WG_THREADS (128 * L_WG)
#define WG_A_BYTES (WG_BM * 128)                     // activations of one stage
#define WG_B_BYTES (128 * 128)                       // weights of one stage
#define WG_STAGE (WG_A_BYTES + WG_B_BYTES)
#define WG_SMEM (WG_STAGES * WG_STAGE + 1024)        // + room to align to 1024

#if LW
#if !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "LW = 1, 2 or 3 (the wgmma kernels) needs arch sm_90a"
#endif

// Eight e2m1 codes (element j in bits 4j..4j+3) -> four bf16x2 words in
// element order: (0, 1), (2, 3), (4, 5), (6, 7), each times the scale pair s.
// prmt puts the even element's nibble in byte 0 and the odd one's in byte 2;
// the other bytes hold nibbles the masks drop.
__device__ __forceinline__ void dequant8_seq(u32 w, u32 s, u32 *o) {
    const u32 ev = w & 0x0F0F0F0Fu, od = (w >> 4) & 0x0F0F0F0Fu;
#pragma unroll
    for (int p = 0; p < 4; p++) {
        const u32 v = prmt(ev, od, (u32)(p | p << 4 | (4 + p) << 8 | (4 + p) << 12));
        o[p] = bf16x2_mul(((v << 12) & 0x80008000u) | ((v << 6) & 0x01C001C0u), s);
    }
}

__device__ __forceinline__ unsigned long long wg_desc(u32 addr) {
    // start address >> 4; leading byte offset unused by the swizzled K-major
    // layout (1); stride byte offset 1024 >> 4 (between 8-row atoms); 128-byte swizzle
    return (unsigned long long)((addr & 0x3FFFFu) >> 4) | (1ull << 16) | (64ull << 32) | (1ull << 62);
}

__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wg_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory"); }
__device__ __forceinline__ void fence_async_smem() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

// Keep the compiler from moving accumulator reads or writes across the asynchronous MMA.
template <int R>
__device__ __forceinline__ void wg_hold(float (&d)[R]) {
#pragma unroll
    for (int i = 0; i < R; i++) asm volatile("" : "+f"(d[i])::"memory");
}

// d (+)= A (64 x 16, descriptor da) x B (16 x 128, descriptor db); acc = 0: d = A x B.
__device__ __forceinline__ void wg_mma128(float (&d)[64], unsigned long long da, unsigned long long db, int acc) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
        "%64, %65, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(da), "l"(db), "r"(acc));
}

#if LW == 1
// The raw weights of one (row, half) unit of a chunk: 32 codes, two block scales.
struct WgRaw {
    uint4 q;
    u32 s;
};

// Dequantise raw units into stage st's B: unit (row n, half hh) -> pieces 4hh..4hh+3 of row n.
__device__ __forceinline__ void wg_put_b(u32 b, const WgRaw *raw, int tid) {
#pragma unroll
    for (int u = 0; u < 256 / WG_THREADS; u++) {
        const int unit = tid + WG_THREADS * u, n = unit >> 1, hh = unit & 1;
        u32 lo, hi;
        scales2(raw[u].s, lo, hi);
        const u32 w[4] = {raw[u].q.x, raw[u].q.y, raw[u].q.z, raw[u].q.w};
#pragma unroll
        for (int k = 0; k < 4; k++) {
            u32 o[4];
            dequant8_seq(w[k], k < 2 ? lo : hi, o);
            const int piece = 4 * hh + k;
            const u32 dst = b + n * 128 + ((piece ^ (n & 7)) << 4);
            asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(dst), "r"(o[0]), "r"(o[1]), "r"(o[2]),
                         "r"(o[3]) : "memory");
        }
    }
}

// The K loop of one work item: acc = A (this warpgroup's 64 rows) x B^T over
// nch chunks of 64. wrow[u], srow[u]: codes and scales of unit u's row (chunk
// 0, its half); arow[k]: activation row of the thread's copy k (piece lt & 7).
__device__ __forceinline__ void wg_kloop(float (&acc)[64], u32 sm, int nch, const unsigned char *const *wrow,
                                         const unsigned char *const *srow, const u16 *const *arow, int tid) {
    const int wg = tid >> 7, lt = tid & 127, pc = lt & 7;
    constexpr int NU = 256 / WG_THREADS;
    WgRaw raw[NU];
    auto load_raw = [&](int c) {
#pragma unroll
        for (int u = 0; u < NU; u++) {
            raw[u].q = ld_stream(wrow[u] + 32 * c);
            raw[u].s = ld_u16(srow[u] + 4 * c);
        }
    };
    auto copy_a = [&](int c) {
        if (c < nch) {
            const u32 a = sm + (c % WG_STAGES) * WG_STAGE + wg * 8192;
#pragma unroll
            for (int k = 0; k < 4; k++) {
                const int r = (lt >> 3) + 16 * k;
                cp16_a(a + r * 128 + ((pc ^ (r & 7)) << 4), arow[k] + 64 * c + 8 * pc);
            }
        }
        cp_commit();
    };
    load_raw(0);
    copy_a(0);
    wg_put_b(sm + WG_A_BYTES, raw, tid);
    load_raw(1);
    copy_a(1);
    for (int c = 0; c < nch; c++) {
        const u32 st = sm + (c % WG_STAGES) * WG_STAGE;
        cp_wait<1>();                 // this thread's copies of chunk c are in
        fence_async_smem();           // its stores and copies visible to the tensor cores
        __syncthreads();              // and everyone else's
        wg_hold(acc);
        wg_fence();
#pragma unroll
        for (int k = 0; k < 4; k++)
            wg_mma128(acc, wg_desc(st + wg * 8192 + 32 * k), wg_desc(st + WG_A_BYTES + 32 * k), c > 0 || k > 0);
        wg_commit();
        wg_hold(acc);
        wg_wait<1>();                 // chunk c - 1 is done: its A stage may be refilled
        if (c + 1 < nch) {
            wg_put_b(sm + ((c + 1) % WG_STAGES) * WG_STAGE + WG_A_BYTES, raw, tid);
            if (c + 2 < nch) load_raw(c + 2);
        }
        copy_a(c + 2);
    }
    wg_wait<0>();
    wg_hold(acc);
    cp_wait<0>();
    __syncthreads();                  // every warpgroup is done with every stage
}

// The codes and scales of this thread's raw units (wg_kloop's wrow, srow):
// unit tid + WG_THREADS * u is half hh of B row n, weight row row_of(n).
template <typename RowOf>
__device__ __forceinline__ void wg_units(const unsigned char **wrow, const unsigned char **srow,
                                         const unsigned char *q, const unsigned char *sf, long long rowb,
                                         long long sfb, int tid, RowOf row_of) {
#pragma unroll
    for (int u = 0; u < 256 / WG_THREADS; u++) {
        const int unit = tid + WG_THREADS * u, n = unit >> 1, hh = unit & 1;
        const long long row = row_of(n);
        wrow[u] = q + row * rowb + 16 * hh;
        srow[u] = sf + row * sfb + 2 * hh;
    }
}

extern "C" __global__ void __launch_bounds__(WG_THREADS, 1)
w4_up_wg(UP_ARGS) {
    extern __shared__ __align__(1024) unsigned char wsm[];
    const u32 sm = (smem_u32(wsm) + 1023u) & ~1023u;
    const int tid = threadIdx.x, wg = tid >> 7, lt = tid & 127, warp = lt >> 5, lane = tid & 31;
    const int ntiles = meta[0], rblocks = I / 64;
    const long long rowb = H / 2, sfb = H / 16;
    for (long long wi = blockIdx.x; wi < (long long)ntiles * rblocks; wi += gridDim.x) {
        const int tile = (int)(wi % ntiles), i0 = (int)(wi / ntiles) * 64;
        const int4 tl = tiles[tile];
        const int e = tl.x, first = tl.y, count = tl.z;
        const unsigned char *wrow[256 / WG_THREADS], *srow[256 / WG_THREADS];
        wg_units(wrow, srow, w13q, w13sf, rowb, sfb, tid,
                 [&](int n) { return (long long)e * 2 * I + (n < 64 ? i0 + n : I + i0 + n - 64); });
        const u16 *arow[4];
#pragma unroll
        for (int k = 0; k < 4; k++)
            arow[k] = x + (long long)(pairs[first + min(64 * wg + (lt >> 3) + 16 * k, count - 1)] / K) * H;
        float acc[64];
        wg_kloop(acc, sm, H / 64, wrow, srow, arow, tid);
        const float s2 = w13s2[e] * 256.0f;
#pragma unroll
        for (int hr = 0; hr < 2; hr++) {
            const int tok = 64 * wg + 16 * warp + (lane >> 2) + 8 * hr;
            if (tok < count) {
                u16 *hp = h + (long long)(first + tok) * I + i0 + 2 * (lane & 3);
#pragma unroll
                for (int j = 0; j < 8; j++) {
                    float v[2];
#pragma unroll
                    for (int b = 0; b < 2; b++) {
                        const float gv = acc[4 * j + 2 * hr + b] * s2, uv = acc[4 * (j + 8) + 2 * hr + b] * s2;
                        v[b] = __fdividef(gv, 1.0f + __expf(-gv)) * uv;
                    }
                    *(u32 *)(hp + 8 * j) = (u32)f32_to_bf16(v[0]) | ((u32)f32_to_bf16(v[1]) << 16);
                }
            }
        }
    }
}

extern "C" __global__ void __launch_bounds__(WG_THREADS, 1)
w4_down_wg(DN_ARGS) {
    extern __shared__ __align__(1024) unsigned char wsm[];
    const u32 sm = (smem_u32(wsm) + 1023u) & ~1023u;
    const int tid = threadIdx.x, wg = tid >> 7, lt = tid & 127, warp = lt >> 5, lane = tid & 31;
    const int ntiles = meta[0], rblocks = H / 128;
    const long long rowb = I / 2, sfb = I / 16;
    for (long long wi = blockIdx.x; wi < (long long)ntiles * rblocks; wi += gridDim.x) {
        const int tile = (int)(wi % ntiles), n0 = (int)(wi / ntiles) * 128;
        const int4 tl = tiles[tile];
        const int e = tl.x, first = tl.y, count = tl.z;
        const unsigned char *wrow[256 / WG_THREADS], *srow[256 / WG_THREADS];
        wg_units(wrow, srow, w2q, w2sf, rowb, sfb, tid, [&](int n) { return (long long)e * H + n0 + n; });
        const u16 *arow[4];
#pragma unroll
        for (int k = 0; k < 4; k++)
            arow[k] = h + (long long)(first + min(64 * wg + (lt >> 3) + 16 * k, count - 1)) * I;
        float acc[64];
        wg_kloop(acc, sm, I / 64, wrow, srow, arow, tid);
        const float s2 = w2s2[e] * 256.0f;
#pragma unroll
        for (int hr = 0; hr < 2; hr++) {
            const int tok = 64 * wg + 16 * warp + (lane >> 2) + 8 * hr;
            if (tok < count) {
                float *yp = y + (long long)pairs[first + tok] * H + n0 + 2 * (lane & 3);
#pragma unroll
                for (int j = 0; j < 16; j++)
                    *(float2 *)(yp + 8 * j) = make_float2(acc[4 * j + 2 * hr] * s2, acc[4 * j + 2 * hr + 1] * s2);
            }
        }
    }
}
#endif   // LW == 1

// ---- the large-batch GEMMs with the weights in registers (LW = 2; sm_90a) -----------
//
// w4_up_rg and w4_down_rg swap the roles of the LW = 1 kernels: the weights are
// wgmma's A operand, 64 rows a warpgroup, dequantised straight into the
// registers wgmma reads (no shared-memory round trip, no barrier for them),
// and the tokens are B, N = RG_N of them a tile (w4_align's tt), so a tile
// fits the tokens an expert has (32 at T = 1024 with DeepSeek's routing)
// instead of wasting half of a 64-token M. A block is RG_WG warpgroups on the
// same tile, 64 * RG_WG weight rows, sharing the activations.
//   - A fragment of m64nNk16 (bf16, registers): warp w of the warpgroup holds
//     rows 16w..16w+15; lane (g = lane / 4, q = lane % 4) holds k = 2q, 2q+1
//     (a0: row g, a1: row g + 8) and k = 2q+8, 2q+9 (a2, a3), as mma.sync's
//     m16n8k16 A. So each lane needs the code byte q of every 8-element word
//     of its rows: the kernels read the rg copy of the codes (gen.cu's
//     nvfp4_pack_rg), which stores each row's 64-byte chunk of 128 elements
//     with byte 16q + p = the linear byte 4p + q (p = 0..15), so lane q's
//     16 bytes are one load. The block scales stay in the linear layout
//     (8 bytes a row and chunk, one load).
//   - The activations go by cp.async into RG_S stages of 128 elements (two
//     64-element k-blocks of RG_N rows in the 128-byte swizzled K-major layout
//     of the LW = 1 kernels), RG_S - 2 chunks ahead; every thread of the block
//     copies, 16 consecutive threads a token row's 256 bytes (one row a thread
//     scatters a warp's copies over 16 or 32 rows: measured slower,
//     docs/perf.md), the rows from a table in shared memory.
//   - A chunk: dequantise the raw codes of chunk c (loaded RG_PF chunks ahead)
//     into one of two A register sets, wait for this thread's copies of c,
//     proxy fence, one __syncthreads, 8 x m64nNk16, commit, wait for chunk
//     c - 1 (so the A set and the stage it read are free: the A set is
//     rewritten at c + 1, the stage refilled at c + 2, by which time every
//     warpgroup has passed the barrier of c + 1 after waiting for c - 1).
// w4_up_rg: A rows 16w + g are the gate rows i = i0 + 8w + g (8 a warp), rows
// 16w + g + 8 the up rows of the same i, so a thread holds gate and up of one
// h element in accumulators 4j + b and 4j + 2 + b (token 8j + 2q + b).
// Requirements beyond the file's: H % 256 == 0 and I % 256 == 0 (whole pairs
// of chunks), I % (32 * RG_WG) == 0, H % (64 * RG_WG) == 0.

#ifndef RG_N
#define RG_N 64
#endif
#ifndef RG_WG
#define RG_WG 1
#endif
#ifndef RG_S
#define RG_S 4
#endif
#ifndef RG_PF
#define RG_PF 2
#endif
// the order of the work items (tile, row block): 0 tile after tile for one row
// block, then the next row block (blocks at work at once read different
// tiles); 1 row block after row block of one tile (blocks at work at once
// share a tile, so its activations stay in L2 while the weights stream by)
#ifndef RG_ORD
#define RG_ORD 0
#endif
#define RG_THREADS (128 * RG_WG)
// RG_OCC: blocks an SM is to hold (launch bounds: at most 65536 / (128 *
// RG_WG * RG_OCC) registers a thread; recipes/nvfp4_moe.lua sizes the grid by
// it and by shared memory). Default: 3 of 32-token tiles, else 2 of one
// warpgroup, 1 of two.
// RG_M: 64-row groups a warpgroup (1 or 2). With 2, the two groups take turns:
// group 0's A registers are refilled while group 1's MMAs run and the other
// way round, one A set each (the same registers as two sets of one group), so
// a block covers 128 * RG_WG rows and each activation byte from L2 feeds
// twice the MMAs.
#ifndef RG_M
#define RG_M 1
#endif
#ifndef RG_OCC
#define RG_OCC (RG_WG == 2 ? 1 : RG_N == 32 ? 3 : 2)
#endif
#define RG_STAGE (256 * RG_N)                        // a stage: RG_N tokens x 128 elements of bf16
#define RG_SMEM (RG_S * RG_STAGE + 4 * RG_N + 1024)  // + the token rows' table, + room to align to 1024
// The functions below take these settings as a configuration (RgCfg), so a
// module may hold the kernels at more than one: w4_up_rg and w4_down_rg are
// the instance at the RG_* settings.

#if LW >= 2
#if RG_N != 32 && RG_N != 64 && RG_N != 128
#error "RG_N must be 32, 64 or 128"
#endif
#if RG_S < 3 || RG_PF < 1 || RG_PF > 2 || RG_M < 1 || RG_M > 2
#error "RG_S must be at least 3, RG_PF 1 or 2, RG_M 1 or 2"
#endif

__device__ __forceinline__ void rg_mma(float (&d)[16], const u32 (&a)[4], unsigned long long db) {
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, "
        "{%16, %17, %18, %19}, %20, 1, 1, 1, 0;\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}
__device__ __forceinline__ void rg_mma(float (&d)[32], const u32 (&a)[4], unsigned long long db) {
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
        "{%32, %33, %34, %35}, %36, 1, 1, 1, 0;\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}
__device__ __forceinline__ void rg_mma(float (&d)[64], const u32 (&a)[4], unsigned long long db) {
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
        "{%64, %65, %66, %67}, %68, 1, 1, 1, 0;\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}

template <int N_, int WG_, int S_, int PF_, int M_, int ORD_> struct RgCfg {
    // (an enum: no storage in the module; lower case: PF, N and the like are macros)
    enum : int { n = N_, wg = WG_, s = S_, pf = PF_, m = M_, ord = ORD_, threads = 128 * WG_, stage = 256 * N_ };
};
typedef RgCfg<RG_N, RG_WG, RG_S, RG_PF, RG_M, RG_ORD> Rg;

__device__ __forceinline__ uint2 ld_stream8(const unsigned char *p) {
    uint2 v;
    asm("ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(p));
    return v;
}

// One row's raw chunk as a lane holds it: its 16 code bytes (4 words, word k =
// byte q of the pieces 4k..4k+3) and the row's 8 block scales.
struct RgRaw {
    uint4 q;
    uint2 s;
};

// A raw chunk (rows g, g + 8) -> the A fragments of its 8 k16 slices: slice
// 2k + h takes bytes 2h, 2h + 1 of word k (pieces 4k + 2h, 4k + 2h + 1); word
// k's scales are the blocks 2k (pieces 4k, 4k + 1) and 2k + 1.
__device__ __forceinline__ void rg_dequant(const RgRaw (&r)[2], u32 (&a)[8][4]) {
#pragma unroll
    for (int row = 0; row < 2; row++) {
        const u32 w[4] = {r[row].q.x, r[row].q.y, r[row].q.z, r[row].q.w};
#pragma unroll
        for (int k = 0; k < 4; k++) {
            u32 lo, hi, o[4];
            scales2(((k < 2 ? r[row].s.x : r[row].s.y) >> (16 * (k & 1))) & 0xffffu, lo, hi);
            const u32 ev = w[k] & 0x0F0F0F0Fu, od = (w[k] >> 4) & 0x0F0F0F0Fu;
#pragma unroll
            for (int p = 0; p < 4; p++) {
                const u32 v = prmt(ev, od, (u32)(p | p << 4 | (4 + p) << 8 | (4 + p) << 12));
                o[p] = bf16x2_mul(((v << 12) & 0x80008000u) | ((v << 6) & 0x01C001C0u), p < 2 ? lo : hi);
            }
            a[2 * k][row] = o[0];          // slice 2k: a0 (row g) / a1 (row g + 8), k 2q, 2q+1
            a[2 * k][2 + row] = o[1];      //           a2 / a3, k 2q+8, 2q+9
            a[2 * k + 1][row] = o[2];
            a[2 * k + 1][2 + row] = o[3];
        }
    }
}

// This thread's cp.async copies of chunk c's activations into its stage:
// 16-byte piece u & 15 of token row u >> 4 for u = tid, tid + C::threads, ...
// (rows: the tile's element offsets into act), then a commit: an empty group
// past the end keeps the count of groups uniform.
template <class C>
__device__ __forceinline__ void rg_copy_act(u32 sm, int c, int nch, const u16 *act, const int *rows, int tid) {
    if (c < nch) {
        const u32 st = sm + (c % C::s) * C::stage;
#pragma unroll
        for (int i = 0; i < C::n * 16 / C::threads; i++) {
            const int u = tid + C::threads * i, r = u >> 4, kb = (u >> 3) & 1, pc = u & 7;
            cp16_a(st + kb * (C::n * 128) + r * 128 + ((pc ^ (r & 7)) << 4), act + rows[r] + 128 * c + 64 * kb + 8 * pc);
        }
    }
    cp_commit();
}

// The token table of a work item (count tokens from first; the missing ones
// point at the last real row, their columns never stored): each row's element
// offset into the activations (x row pairs[t] / div, or h row t when div is 0).
template <class C>
__device__ __forceinline__ void rg_rows(int *rows, const int *pairs, int first, int count, int div, int stride,
                                        int tid) {
    for (int r = tid; r < C::n; r += C::threads) {
        const int t = first + min(r, count - 1);
        rows[r] = (div ? pairs[t] / div : t) * stride;
    }
    __syncthreads();
}

// A lane's raw codes and scales of rows g and g + 8 (wq[row], ws[row] at chunk 0) at chunk c.
__device__ __forceinline__ void rg_load(RgRaw (&r)[2], const unsigned char *const *wq,
                                        const unsigned char *const *ws, int c) {
#pragma unroll
    for (int row = 0; row < 2; row++) {
        r[row].q = ld_stream(wq[row] + 64 * c);
        r[row].s = ld_stream8(ws[row] + 8 * c);
    }
}

// One chunk's 8 MMAs (k16 slices of the stage at st) on acc, issued as one
// group: the descriptors made before the stage opens (wgmma.fence).
template <class C>
__device__ __forceinline__ void rg_chunk_mma(float (&acc)[C::n / 2], const u32 (&a)[8][4], u32 st) {
    unsigned long long db[8];
#pragma unroll
    for (int s = 0; s < 8; s++) db[s] = wg_desc(st + (s >> 2) * (C::n * 128) + 32 * (s & 3));
    wg_hold(acc);
    wg_fence();
#pragma unroll
    for (int s = 0; s < 8; s++) rg_mma(acc, a[s], db[s]);
    wg_commit();
    wg_hold(acc);
}

// The K loop of one work item: acc = this warpgroup's 64 weight rows x the
// tile's C::n tokens over nch chunks of 128. wq[row], ws[row]: the lane's
// codes and scales of rows g and g + 8 at chunk 0; act, rows: the
// activations and the tile's token table (rg_copy_act).
template <class C>
__device__ __forceinline__ void rg_kloop(float (&acc)[C::n / 2], u32 sm, int nch, const unsigned char *const *wq,
                                         const unsigned char *const *ws, const u16 *act, const int *rows,
                                         int tid) {
    constexpr int D = C::s - 2;                       // chunks of activations copied ahead
    RgRaw raw[C::pf][2];
    u32 a[2][8][4];
    auto copy_act = [&](int c) { rg_copy_act<C>(sm, c, nch, act, rows, tid); };
    auto step = [&](int c, u32 (&ac)[8][4], RgRaw (&rc)[2]) {
        rg_dequant(rc, ac);
        if (c + C::pf < nch) rg_load(rc, wq, ws, c + C::pf);
        cp_wait<D - 1>();             // this thread's copies of chunk c are in
        fence_async_smem();           // visible to the tensor cores
        __syncthreads();              // and everyone else's
        rg_chunk_mma<C>(acc, ac, sm + (c % C::s) * C::stage);
        wg_wait<1>();                 // chunk c - 1 is done with its A set and its stage
        copy_act(c + D);
    };
#pragma unroll
    for (int i = 0; i < C::n / 2; i++) acc[i] = 0.0f;
#pragma unroll
    for (int p = 0; p < C::pf; p++)
        if (p < nch) rg_load(raw[p], wq, ws, p);
#pragma unroll
    for (int d = 0; d < D; d++) copy_act(d);
    // nch is even (H and I multiples of 256): a step taken on a condition here
    // makes ptxas serialise every wgmma (C7513)
    for (int c = 0; c < nch; c += 2) {
        step(c, a[0], raw[0]);
        step(c + 1, a[1], raw[C::pf - 1]);
    }
    wg_wait<0>();
    wg_hold(acc);
    cp_wait<0>();
    __syncthreads();                  // every warpgroup is done with every stage and the table
}

// The K loop with two row groups a warpgroup (C::m = 2): acc[m] = group m's 64
// weight rows x the tile's tokens; wq[m][row], ws[m][row] as rg_kloop's. A
// chunk: for each group, wait until its MMAs of the chunk before are done
// (wait_group 1: all but the other group's newest), dequantise into its A set,
// then (group 0) wait for the chunk's activations and the barrier, and issue
// its 8 MMAs as one group. The stage of chunk c - 2 is refilled after the
// barrier of c, when every warpgroup has retired both groups of c - 2. Codes
// one chunk ahead (C::pf is 1 here).
template <class C>
__device__ __forceinline__ void rg_kloop2(float (&acc)[2][C::n / 2], u32 sm, int nch,
                                          const unsigned char *const (*wq)[2], const unsigned char *const (*ws)[2],
                                          const u16 *act, const int *rows, int tid) {
    constexpr int D = C::s - 2;
    RgRaw raw[2][2];
    u32 a[2][8][4];
    auto copy_act = [&](int c) { rg_copy_act<C>(sm, c, nch, act, rows, tid); };
#pragma unroll
    for (int m = 0; m < 2; m++) {
#pragma unroll
        for (int i = 0; i < C::n / 2; i++) acc[m][i] = 0.0f;
        rg_load(raw[m], wq[m], ws[m], 0);
    }
#pragma unroll
    for (int d = 0; d < D; d++) copy_act(d);
    for (int c = 0; c < nch; c++) {
        const u32 st = sm + (c % C::s) * C::stage;
#pragma unroll
        for (int m = 0; m < 2; m++) {
            wg_wait<1>();             // this group's MMAs of chunk c - 1 are done with its A set
            rg_dequant(raw[m], a[m]);
            rg_load(raw[m], wq[m], ws[m], min(c + 1, nch - 1));   // (the last chunk again at the end: no branch)
            if (m == 0) {
                cp_wait<D - 1>();     // this thread's copies of chunk c are in
                fence_async_smem();
                __syncthreads();
            }
            rg_chunk_mma<C>(acc[m], a[m], st);
        }
        copy_act(c + D);
    }
    wg_wait<0>();
    wg_hold(acc[0]);
    wg_hold(acc[1]);
    cp_wait<0>();
    __syncthreads();                  // every warpgroup is done with every stage and the table
}

// The K loop of a work item for C::m row groups a warpgroup.
template <class C>
__device__ __forceinline__ void rg_kloop_m(float (&acc)[C::m][C::n / 2], u32 sm, int nch,
                                           const unsigned char *const (*wq)[2], const unsigned char *const (*ws)[2],
                                           const u16 *act, const int *rows, int tid) {
    if constexpr (C::m == 2) rg_kloop2<C>(acc, sm, nch, wq, ws, act, rows, tid);
    else rg_kloop<C>(acc[0], sm, nch, wq[0], ws[0], act, rows, tid);
}

// Work item wi of ntiles x rblocks in C::ord's order: its row block, and its
// tile's expert, first pair and token count.
template <class C>
__device__ __forceinline__ int rg_item(long long wi, int ntiles, int rblocks, const int4 *tiles, int &e, int &first,
                                       int &count) {
    const int tile = (int)(C::ord ? wi / rblocks : wi % ntiles), rb = (int)(C::ord ? wi % rblocks : wi / ntiles);
    const int4 tl = tiles[tile];
    e = tl.x, first = tl.y, count = tl.z;
    return rb;
}

// The epilogues of one 64-row group's accumulators (R = tokens / 2 of them a
// thread, wgmma's m64nN layout): up, SiLU(gate) * up rounded to bf16 into h
// column i (gate and up of one i in accumulators 4j + b and 4j + 2 + b);
// down, the f32 rows of y, columns n and n + 8. Only the tile's count tokens
// are stored.
template <int R>
__device__ __forceinline__ void rg_put_h(const float (&acc)[R], float s2, u16 *h, int first, int count, int I, int i,
                                         int q) {
#pragma unroll
    for (int j = 0; j < R / 4; j++)
#pragma unroll
        for (int b = 0; b < 2; b++) {
            const int tok = 8 * j + 2 * q + b;
            if (tok < count) {
                const float gv = acc[4 * j + b] * s2, uv = acc[4 * j + 2 + b] * s2;
                h[(long long)(first + tok) * I + i] = f32_to_bf16(__fdividef(gv, 1.0f + __expf(-gv)) * uv);
            }
        }
}
template <int R>
__device__ __forceinline__ void rg_put_y(const float (&acc)[R], float s2, float *y, const int *pairs, int first,
                                         int count, int H, int n, int q) {
#pragma unroll
    for (int j = 0; j < R / 4; j++)
#pragma unroll
        for (int b = 0; b < 2; b++) {
            const int tok = 8 * j + 2 * q + b;
            if (tok < count) {
                float *yp = y + (long long)pairs[first + tok] * H + n;
                yp[0] = acc[4 * j + b] * s2;
                yp[8] = acc[4 * j + 2 + b] * s2;
            }
        }
}

// The GEMMs of one configuration: up (gate, up, SiLU-and-mul into h) and down (into y).
template <class C>
__device__ __forceinline__ void rg_up(UP_ARGS) {
    extern __shared__ __align__(1024) unsigned char rsm[];
    const u32 sm = (smem_u32(rsm) + 1023u) & ~1023u;
    int *rows = (int *)(rsm + (sm - smem_u32(rsm)) + C::s * C::stage);
    const int tid = threadIdx.x, wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31, g = lane >> 2, q = lane & 3;
    const int ntiles = meta[0], rblocks = I / (32 * C::wg * C::m);
    const long long rowb = H / 2, sfb = H / 16;
    for (long long wi = blockIdx.x; wi < (long long)ntiles * rblocks; wi += gridDim.x) {
        int e, first, count;
        const int rb = rg_item<C>(wi, ntiles, rblocks, tiles, e, first, count);
        int i[C::m];                  // the h column of row group m (its gate row, and its up row I later)
        const unsigned char *wq[C::m][2], *ws[C::m][2];
#pragma unroll
        for (int m = 0; m < C::m; m++) {
            i[m] = rb * 32 * C::wg * C::m + 32 * (C::m * wg + m) + 8 * warp + g;
            const long long gate = (long long)e * 2 * I + i[m], up = gate + I;
            wq[m][0] = w13q + gate * rowb + 16 * q;
            wq[m][1] = w13q + up * rowb + 16 * q;
            ws[m][0] = w13sf + gate * sfb;
            ws[m][1] = w13sf + up * sfb;
        }
        rg_rows<C>(rows, pairs, first, count, K, H, tid);
        float acc[C::m][C::n / 2];
        rg_kloop_m<C>(acc, sm, H / 128, wq, ws, x, rows, tid);
        const float s2 = w13s2[e] * 256.0f;
#pragma unroll
        for (int m = 0; m < C::m; m++) rg_put_h(acc[m], s2, h, first, count, I, i[m], q);
    }
}

template <class C>
__device__ __forceinline__ void rg_down(DN_ARGS) {
    extern __shared__ __align__(1024) unsigned char rsm[];
    const u32 sm = (smem_u32(rsm) + 1023u) & ~1023u;
    int *rows = (int *)(rsm + (sm - smem_u32(rsm)) + C::s * C::stage);
    const int tid = threadIdx.x, wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31, g = lane >> 2, q = lane & 3;
    const int ntiles = meta[0], rblocks = H / (64 * C::wg * C::m);
    const long long rowb = I / 2, sfb = I / 16;
    for (long long wi = blockIdx.x; wi < (long long)ntiles * rblocks; wi += gridDim.x) {
        int e, first, count;
        const int rb = rg_item<C>(wi, ntiles, rblocks, tiles, e, first, count);
        int n[C::m];                  // the output column of row group m's row g (and n + 8)
        const unsigned char *wq[C::m][2], *ws[C::m][2];
#pragma unroll
        for (int m = 0; m < C::m; m++) {
            n[m] = rb * 64 * C::wg * C::m + 64 * (C::m * wg + m) + 16 * warp + g;
            const long long r0 = (long long)e * H + n[m], r1 = r0 + 8;
            wq[m][0] = w2q + r0 * rowb + 16 * q;
            wq[m][1] = w2q + r1 * rowb + 16 * q;
            ws[m][0] = w2sf + r0 * sfb;
            ws[m][1] = w2sf + r1 * sfb;
        }
        rg_rows<C>(rows, pairs, first, count, 0, I, tid);
        float acc[C::m][C::n / 2];
        rg_kloop_m<C>(acc, sm, I / 128, wq, ws, h, rows, tid);
        const float s2 = w2s2[e] * 256.0f;
#pragma unroll
        for (int m = 0; m < C::m; m++) rg_put_y(acc[m], s2, y, pairs, first, count, H, n[m], q);
    }
}
#define RG_UP_CALL T, H, I, E, K, x, pairs, tiles, meta, w13q, w13sf, w13s2, h
#define RG_DN_CALL T, H, I, E, K, pairs, tiles, meta, h, w2q, w2sf, w2s2, y

#if LW == 2
extern "C" __global__ void __launch_bounds__(RG_THREADS, RG_OCC) w4_up_rg(UP_ARGS) { rg_up<Rg>(RG_UP_CALL); }
extern "C" __global__ void __launch_bounds__(RG_THREADS, RG_OCC) w4_down_rg(DN_ARGS) { rg_down<Rg>(RG_DN_CALL); }
#endif
#if LW == 3
// ---- the warp-specialised register-A kernels (LW = 3; sm_90a) ---------------------
//
// w4_up_sp and w4_down_sp compute what w4_up_rg and w4_down_rg do (the weights
// as wgmma's A operand, dequantised into registers from the rg copy of the
// codes; the tokens as B from shared memory) with the loads taken off the
// warps that compute. A block is three warpgroups and owns the SM:
//   - warpgroup 0, the producer (setmaxnreg.dec to SP_PREG registers), copies
//     everything a 128-element chunk needs into a ring of SP_S stages by
//     cp.async: the codes of the block's SP_R = 128 * SP_M weight rows (64 bytes a row), their
//     block scales (8 bytes a row) and the tile's activations (in the 128-byte
//     swizzled K-major layout wgmma reads). It keeps SP_LAG chunks of copies in
//     flight: after committing chunk j it waits for chunk j - SP_LAG's copies,
//     makes them visible to the tensor cores (fence.proxy.async) and arrives on
//     that stage's "full" mbarrier (128 arrivals). Before it refills a stage it
//     waits on the stage's "empty" mbarrier.
//   - warpgroups 1 and 2, the consumers (setmaxnreg.inc to SP_CREG), each own
//     64 * SP_M of the SP_R rows as SP_M 64-row groups taking turns (as RG_M): for
//     each chunk, wait on "full", then for each group read its codes and scales
//     from the stage (16 + 8 bytes a lane and row), wait until the MMAs that
//     read the A set it fills are done (wgmma.wait_group SP_AS - 1), dequantise
//     into it and issue the group's 8 x m64nNk16 as one wgmma group. Once every
//     group of chunk c - 1 is done, each warp's lane 0 arrives on that stage's
//     "empty" mbarrier (8 arrivals).
// No block-wide barrier after the start: the two sides meet only at the
// mbarriers, and the producer runs ahead across work items (the ring's chunk
// count goes on from one item to the next), so the next item's loads overlap
// this one's epilogue. A tile holds up to SP_N tokens (w4_align's tt); a tile
// of at most 32 or 64 runs the m64n32k16 or m64n64k16 instance of the K loop
// (the producer copies only those token rows), so the last, partial tile of an
// expert costs what its tokens need.
// Stage layout (1024-aligned): activations [SP_N * 256 bytes: k-block kb of
// the tile's nv rows at kb * nv * 128], codes [SP_R rows x 64 bytes], scales
// [SP_R rows x 8 bytes]. Warp w of consumer cw's group m holds, in lane row g,
// for up the gate row (hf 0) and the up row (hf 1) of h column
// i = 64 * SP_M * rb + 32 * (SP_M * cw + m) + 8 * w + g, at stage rows
// 64 * SP_M * hf + i - 64 * SP_M * rb; for down the rows of output columns
// n = SP_R * rb + 64 * (SP_M * cw + m) + 16 * w + 8 * hf + g, at stage rows
// n - SP_R * rb (sp_wrow, sp_rho).
// SP_TMA = 1: the codes come by TMA (one 2D box of SP_R rows x 64 bytes of w2's
// rg codes, or two of SP_R / 2 rows of w13's: gate, up), issued by producer thread
// 0 with the stage's byte count on its "full" mbarrier (one more arrival);
// the kernels then take the codes' tensor map as a last parameter.
// Requirements beyond the file's: H % 256 == 0 and I % 256 == 0 (whole
// 128-element chunks; down's row blocks of up to 256).

#ifndef SP_N
#define SP_N 128
#endif
#ifndef SP_S
#define SP_S (SP_N == 128 ? 4 : 6)
#endif
#ifndef SP_LAG
#define SP_LAG 1
#endif
#ifndef SP_ORD
#define SP_ORD 1
#endif
// Registers after setmaxnreg: the producer's and each consumer's counts add up
// to three times the entry count (168 at 384 threads, one block an SM), as
// CUTLASS's (40, 232) and others' (24, 240) do (hwdocs/hopper.md, section 9).
#ifndef SP_PREG
#define SP_PREG 72
#endif
#ifndef SP_CREG
#define SP_CREG 216
#endif
#ifndef SP_TMA
#define SP_TMA 0
#endif
// A sets a consumer holds: 2, one a group (a group dequantises while the
// other's MMAs run), or 1 (32 registers fewer: each group waits for the MMAs
// before it; the other consumer warpgroup's MMAs fill the gap)
// 64-row groups a consumer owns: 2 (a block's 256 weight rows) or 1 (128
// rows: half the accumulators, so that ptxas keeps the MMAs of 128-token tiles
// asynchronous; one A set, since a chunk's MMAs on the one accumulator set
// may not overlap the next chunk's dequantisation into another: ptxas
// serialises them, C7513)
#ifndef SP_M
#define SP_M 2
#endif
#ifndef SP_AS
#define SP_AS SP_M
#endif
#if SP_M != 1 && SP_M != 2
#error "SP_M must be 1 or 2"
#endif
#if SP_AS != 1 && SP_AS != SP_M
#error "SP_AS must be 1 or SP_M"
#endif
#define SP_R (128 * SP_M)                              // weight rows of a block (stage rows)
#if SP_N != 64 && SP_N != 128
#error "SP_N must be 64 or 128"
#endif
#if SP_PREG + 2 * SP_CREG != 504
#error "SP_PREG + 2 * SP_CREG must be 504 (3 x 168)"
#endif
#if SP_LAG < 1 || SP_LAG > SP_S - 2
#error "SP_LAG must be 1 .. SP_S - 2"
#endif
#define SP_ACT (SP_N * 256)                            // activations of a stage
#define SP_STAGE (SP_ACT + SP_R * 64 + SP_R * 8)       // + codes, + scales
#define SP_SMEM (SP_S * SP_STAGE + 16 * SP_S + 4 * SP_N + 1024)   // + mbarriers, token table, 1 KB to align

struct alignas(64) SpMap {   // a CUtensorMap (the driver's 128 opaque bytes)
    unsigned long long opaque[16];
};

template <int N_> struct SpN {
    enum : int { n = N_ };
};

__device__ __forceinline__ void mbar_init(u32 bar, int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive(u32 bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
// An arrival where on != 0, as a predicated instruction (a branch around it
// between two wgmma groups makes ptxas serialise every wgmma, C7513).
__device__ __forceinline__ void mbar_arrive_if(u32 bar, int on) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %1, 0;\n@p mbarrier.arrive.shared::cta.b64 _, [%0];\n}\n" ::"r"(bar),
                 "r"(on) : "memory");
}
__device__ __forceinline__ void mbar_wait(u32 bar, u32 parity) {
    asm volatile(
        "{\n.reg .pred p;\nSP_WAIT:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
        "@!p bra SP_WAIT;\n}\n" ::"r"(bar), "r"(parity) : "memory");
}
__device__ __forceinline__ void mbar_arrive_tx(u32 bar, u32 bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void tma_2d(u32 dst, const SpMap *map, int x, int y, u32 bar) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                 ::"r"(dst), "l"((unsigned long long)map), "r"(x), "r"(y), "r"(bar) : "memory");
}
__device__ __forceinline__ void producer_sync() { asm volatile("bar.sync 1, 128;" ::: "memory"); }

// Work item wi of ntiles x rblocks in SP_ORD's order (as rg_item).
__device__ __forceinline__ int sp_item(long long wi, int ntiles, int rblocks, const int4 *tiles, int &e, int &first,
                                       int &count) {
    const int tile = (int)(SP_ORD ? wi / rblocks : wi % ntiles), rb = (int)(SP_ORD ? wi % rblocks : wi / ntiles);
    const int4 tl = tiles[tile];
    e = tl.x, first = tl.y, count = tl.z;
    return rb;
}

// The token rows an instance of the K loop multiplies: 32, 64 or SP_N.
__device__ __forceinline__ int sp_rows(int count) { return count <= 32 ? 32 : count <= 64 ? 64 : SP_N; }

// Weight row (of w13 or w2, as a row index of the whole tensor) of stage row
// rho: up, the gate rows of the block's 128 h columns then their up rows;
// down, the block's 256 rows in order (so each is one box of a tensor map).
__device__ __forceinline__ long long sp_wrow(int up, int rho, int e, int rb, int H, int I) {
    if (up) return (long long)e * 2 * I + (rho >> (5 + SP_M)) * I + 64 * SP_M * rb + (rho & (64 * SP_M - 1));
    return (long long)e * H + SP_R * rb + rho;
}

// The stage row of consumer cw's group m, warp w, lane row g, half hf (sp_wrow's order).
__device__ __forceinline__ int sp_rho(int up, int cw, int m, int w, int g, int hf) {
    return up ? 64 * SP_M * hf + 32 * (SP_M * cw + m) + 8 * w + g : 64 * (SP_M * cw + m) + 16 * w + 8 * hf + g;
}

// The producer: every chunk of every work item of this block into the ring.
// up: 1 for w13 (activations x, rows pairs / K), 0 for w2 (activations h).
__device__ __forceinline__ void sp_produce(int up, int H, int I, int K, const int *pairs, const int4 *tiles,
                                           const int *meta, const u16 *act, const unsigned char *wq,
                                           const unsigned char *wsf, const SpMap *tq, u32 sm, u32 bars, int *rows,
                                           int p) {
    const int ntiles = meta[0], rblocks = up ? I / (64 * SP_M) : H / SP_R, kdim = up ? H : I, nch = kdim / 128;
    const long long rowb = kdim / 2, sfb = kdim / 16;
    int gp = 0;
    for (long long wi = blockIdx.x; wi < (long long)ntiles * rblocks; wi += gridDim.x) {
        int e, first, count;
        const int rb = sp_item(wi, ntiles, rblocks, tiles, e, first, count), nv = sp_rows(count);
        producer_sync();              // every producer thread has issued the previous item's copies
        for (int r = p; r < nv; r += 128) {
            const int t = first + min(r, count - 1);
            rows[r] = (up ? pairs[t] / K : t) * kdim;
        }
        producer_sync();
        // this thread's code pieces: stage rows rho0 + 32 j, 16-byte piece p & 3; scale rows p + 128 j
        const int rho0 = p >> 2, pc = p & 3;
        const unsigned char *qs[4 * SP_M], *ss[SP_M];
#pragma unroll
        for (int j = 0; j < 4 * SP_M; j++) qs[j] = SP_TMA ? wq : wq + sp_wrow(up, rho0 + 32 * j, e, rb, H, I) * rowb + 16 * pc;
#pragma unroll
        for (int j = 0; j < SP_M; j++) ss[j] = wsf + sp_wrow(up, p + 128 * j, e, rb, H, I) * sfb;
        for (int c = 0; c < nch; c++, gp++) {
            const int s = gp % SP_S;
            mbar_wait(bars + 8 * SP_S + 8 * s, ((gp / SP_S) & 1) ^ 1);   // empty: the consumers are done with it
            const u32 st = sm + s * SP_STAGE, cq = st + SP_ACT, cs = cq + SP_R * 64;
            if (SP_TMA) {
                if (p == 0) {
                    mbar_arrive_tx(bars + 8 * s, SP_R * 64);
                    if (up) {
                        tma_2d(cq, tq, 64 * c, (int)sp_wrow(1, 0, e, rb, H, I), bars + 8 * s);
                        tma_2d(cq + 64 * SP_M * 64, tq, 64 * c, (int)sp_wrow(1, 64 * SP_M, e, rb, H, I), bars + 8 * s);
                    } else {
                        tma_2d(cq, tq, 64 * c, (int)sp_wrow(0, 0, e, rb, H, I), bars + 8 * s);
                    }
                }
            } else {
#pragma unroll
                for (int j = 0; j < 4 * SP_M; j++) cp16_w(cq + (rho0 + 32 * j) * 64 + 16 * pc, qs[j] + 64 * c);
            }
#pragma unroll
            for (int j = 0; j < SP_M; j++) cp8_g2s(cs + (p + 128 * j) * 8, ss[j] + 8 * c);
            for (int u = p; u < 16 * nv; u += 128) {
                const int r = u >> 4, kb = (u >> 3) & 1, k8 = u & 7;
                cp16_a(st + kb * (nv * 128) + r * 128 + ((k8 ^ (r & 7)) << 4), act + rows[r] + 128 * c + 64 * kb + 8 * k8);
            }
            cp_commit();
            if (gp >= SP_LAG) {
                cp_wait<SP_LAG>();    // chunk gp - SP_LAG's copies are in
                fence_async_smem();   // visible to the tensor cores
                mbar_arrive(bars + 8 * ((gp - SP_LAG) % SP_S));
            }
        }
    }
    cp_wait<0>();
    fence_async_smem();
    for (int j = gp - SP_LAG < 0 ? 0 : gp - SP_LAG; j < gp; j++) mbar_arrive(bars + 8 * (j % SP_S));
}

// One consumer's K loop over a work item at nv = C::n token rows: acc[m] =
// group m's 64 rows x the tile's tokens. gc: the ring's chunk count, carried
// from item to item. ldq, lds: this lane's offsets of its rows' codes and
// scales (group m, half hf) within a stage.
template <class C>
__device__ __forceinline__ void sp_kloop(float (&acc)[SP_M][C::n / 2], u32 sm, u32 bars, int nch, int &gc,
                                         const u32 (&ldq)[SP_M][2], const u32 (&lds)[SP_M][2], int lane) {
    u32 a[SP_AS][8][4];
#pragma unroll
    for (int m = 0; m < SP_M; m++)
#pragma unroll
        for (int i = 0; i < C::n / 2; i++) acc[m][i] = 0.0f;
    for (int c = 0; c < nch; c++, gc++) {
        const int s = gc % SP_S;
        const u32 st = sm + s * SP_STAGE;
        mbar_wait(bars + 8 * s, (gc / SP_S) & 1);                 // full: the chunk is in
#pragma unroll
        for (int m = 0; m < SP_M; m++) {
            RgRaw raw[2];
#pragma unroll
            for (int hf = 0; hf < 2; hf++) {
                asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                             : "=r"(raw[hf].q.x), "=r"(raw[hf].q.y), "=r"(raw[hf].q.z), "=r"(raw[hf].q.w)
                             : "r"(st + ldq[m][hf]));
                asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];" : "=r"(raw[hf].s.x), "=r"(raw[hf].s.y) : "r"(st + lds[m][hf]));
            }
            wg_wait<SP_AS - 1>();     // the MMAs that read the A set this group fills are done
            if (m == SP_M - 1)        // and so every group of chunk c - 1: its stage is free
                mbar_arrive_if(bars + 8 * SP_S + 8 * ((gc + SP_S - 1) % SP_S), lane == 0 && c > 0);
            rg_dequant(raw, a[m % SP_AS]);
            rg_chunk_mma<C>(acc[m], a[m % SP_AS], st);
        }
    }
    wg_wait<0>();
#pragma unroll
    for (int m = 0; m < SP_M; m++) wg_hold(acc[m]);
    mbar_arrive_if(bars + 8 * SP_S + 8 * ((gc + SP_S - 1) % SP_S), lane == 0);
}

// One consumer's work item at nv = C::n token rows, with its epilogue:
// up: SiLU(gate) * up rounded to bf16 into h; down: the f32 rows of y.
template <class C>
__device__ __forceinline__ void sp_consume_item(int up, int H, int I, int e, int first, int count, int rb,
                                                const int *pairs, const float *s2v, u16 *h, float *y, u32 sm,
                                                u32 bars, int nch, int &gc, const u32 (&ldq)[SP_M][2],
                                                const u32 (&lds)[SP_M][2], int cw, int w, int lane) {
    const int g = lane >> 2, q = lane & 3;
    float acc[SP_M][C::n / 2];
    sp_kloop<C>(acc, sm, bars, nch, gc, ldq, lds, lane);
    const float s2 = s2v[e] * 256.0f;
#pragma unroll
    for (int m = 0; m < SP_M; m++) {
        if (up) rg_put_h(acc[m], s2, h, first, count, I, 64 * SP_M * rb + 32 * (SP_M * cw + m) + 8 * w + g, q);
        else rg_put_y(acc[m], s2, y, pairs, first, count, H, SP_R * rb + 64 * (SP_M * cw + m) + 16 * w + g, q);
    }
}

// Both GEMMs: up (w13 = wq/wsf/s2, x, into h) or down (w2, h, into y).
__device__ __forceinline__ void sp_gemm(int up, int H, int I, int K, const u16 *act, const int *pairs,
                                        const int4 *tiles, const int *meta, const unsigned char *wq,
                                        const unsigned char *wsf, const SpMap *tq, const float *s2v, u16 *h,
                                        float *y) {
    extern __shared__ __align__(1024) unsigned char ssm[];
    const u32 sm = (smem_u32(ssm) + 1023u) & ~1023u;
    const u32 bars = sm + SP_S * SP_STAGE;                       // full[SP_S], then empty[SP_S]
    int *rows = (int *)(ssm + (sm - smem_u32(ssm)) + SP_S * SP_STAGE + 16 * SP_S);
    const int tid = threadIdx.x;
    if (tid == 0) {
        for (int s = 0; s < SP_S; s++) {
            mbar_init(bars + 8 * s, 128 + SP_TMA);
            mbar_init(bars + 8 * SP_S + 8 * s, 8);
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");   // (seen by the TMA unit)
    }
    __syncthreads();
    if (tid < 128) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(SP_PREG));
        sp_produce(up, H, I, K, pairs, tiles, meta, act, wq, wsf, tq, sm, bars, rows, tid);
        return;
    }
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(SP_CREG));
    const int ct = tid - 128, cw = ct >> 7, w = (ct >> 5) & 3, lane = ct & 31, g = lane >> 2, q = lane & 3;
    const int ntiles = meta[0], rblocks = up ? I / (64 * SP_M) : H / SP_R, nch = (up ? H : I) / 128;
    u32 ldq[SP_M][2], lds[SP_M][2];
#pragma unroll
    for (int m = 0; m < SP_M; m++)
#pragma unroll
        for (int hf = 0; hf < 2; hf++) {
            const int rho = sp_rho(up, cw, m, w, g, hf);
            ldq[m][hf] = SP_ACT + rho * 64 + 16 * q;
            lds[m][hf] = SP_ACT + SP_R * 64 + rho * 8;
        }
    int gc = 0;
    for (long long wi = blockIdx.x; wi < (long long)ntiles * rblocks; wi += gridDim.x) {
        int e, first, count;
        const int rb = sp_item(wi, ntiles, rblocks, tiles, e, first, count), nv = sp_rows(count);
        if (nv == 32)
            sp_consume_item<SpN<32>>(up, H, I, e, first, count, rb, pairs, s2v, h, y, sm, bars, nch, gc, ldq, lds, cw, w, lane);
        else if (nv == 64)
            sp_consume_item<SpN<64>>(up, H, I, e, first, count, rb, pairs, s2v, h, y, sm, bars, nch, gc, ldq, lds, cw, w, lane);
#if SP_N == 128
        else
            sp_consume_item<SpN<128>>(up, H, I, e, first, count, rb, pairs, s2v, h, y, sm, bars, nch, gc, ldq, lds, cw, w, lane);
#endif
    }
}

#if SP_TMA
#define SP_MAP , const __grid_constant__ SpMap tq
#define SP_MAP_ARG &tq
#else
#define SP_MAP
#define SP_MAP_ARG nullptr
#endif
extern "C" __global__ void __launch_bounds__(384, 1) w4_up_sp(UP_ARGS SP_MAP) {
    sp_gemm(1, H, I, K, x, pairs, tiles, meta, w13q, w13sf, SP_MAP_ARG, w13s2, h, nullptr);
}
extern "C" __global__ void __launch_bounds__(384, 1) w4_down_sp(DN_ARGS SP_MAP) {
    sp_gemm(0, H, I, K, h, pairs, tiles, meta, w2q, w2sf, SP_MAP_ARG, w2s2, nullptr, y);
}
#endif   // LW == 3
#endif   // LW >= 2
#endif   // LW

// ---- w4_combine ----------------------------------------------------------------

extern "C" __global__ void __launch_bounds__(256)
w4_combine(int T, int H, int K, const float *tw, const float *y, u16 *out) {
    long long n = (long long)T * H / 4;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        long long t = i / (H / 4), c = (i % (H / 4)) * 4;
        float4 s = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        for (int j = 0; j < K; j++) {
            float wgt = tw[t * K + j];
            float4 v = *(const float4 *)(y + (t * K + j) * H + c);
            s.x += wgt * v.x; s.y += wgt * v.y; s.z += wgt * v.z; s.w += wgt * v.w;
        }
        uint2 o;
        o.x = (u32)f32_to_bf16(s.x) | ((u32)f32_to_bf16(s.y) << 16);
        o.y = (u32)f32_to_bf16(s.z) | ((u32)f32_to_bf16(s.w) << 16);
        *(uint2 *)(out + t * H + c) = o;
    }
}
