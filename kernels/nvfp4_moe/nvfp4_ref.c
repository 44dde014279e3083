/* nvfp4_ref.c: the NVFP4 format and the routed-experts MoE layer on the CPU:
 * FP8 E4M3 and FP4 E2M1 conversions, the reference quantiser, the 128x4
 * swizzled scale layout, dequantisation, a float64 reference of the layer,
 * and seeded generators for its weights and routing. Compiled by the host
 * backend (kwb.host.compile) and called through libffi; it links to nothing
 * of kwb. Simple on purpose: everything else is checked against this file.
 *
 * Formats
 *   e4m3    float8_e4m3fn: sign, 4 exponent bits (bias 7), 3 mantissa bits;
 *           subnormals (least 2^-9), no infinities, 0x7f and 0xff are NaN,
 *           largest finite 448. Encoding rounds to nearest, ties to even, and
 *           saturates: anything of magnitude >= 448 (infinities included)
 *           becomes +-448; NaN becomes 0x7f.
 *   e2m1    4-bit codes, bit 3 the sign, codes 0..7 are 0, 0.5, 1, 1.5, 2, 3,
 *           4, 6. Encoding follows the ModelOpt quantiser exactly: the code is
 *           the number of boundaries {0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5}
 *           strictly below |y|, plus one when |y| equals 0.75, 1.75 or 3.5;
 *           that is round to nearest with ties to the even code (0.25 -> 0,
 *           0.75 -> 1.0, 1.25 -> 1.0, 1.75 -> 2, 2.5 -> 2, 3.5 -> 4, 5 -> 4),
 *           and anything above 5 (infinities and NaN too) -> 6. The sign bit
 *           is set when y < 0, even where the magnitude rounds to 0 (code 8).
 *
 * An NVFP4 tensor of `rows` x `cols` (cols, the reduction dimension K, a
 * multiple of 16), as ModelOpt checkpoints store it:
 *   q    uint8 [rows, cols/2]: two e2m1 codes a byte, the even element in the
 *        low nibble: q[r][j] = code[r][2j] | code[r][2j+1] << 4
 *   sf   e4m3  [rows, cols/16]: one block scale per 16 consecutive elements of
 *        a row (the "linear" layout)
 *   s2   float32: the per-tensor scale
 *   value[r][c] = e2m1(code[r][c]) * e4m3(sf[r][c/16]) * s2
 * Batched calls take `batch` such tensors back to back, with one s2 each.
 *
 * Quantiser (ModelOpt's NVFP4QTensor.quantize, in the same float32 steps):
 *   s2   = amax(|W|) / 2688                         (2688 = 6 * 448)
 *   s_b  = e4m3(amax(|block|) / (6 * s2)), a zero ratio giving 1.0
 *   code = e2m1(x / (s_b * s2))
 * An all-zero tensor, where ModelOpt would divide 0 by 0, gets s2 = 1, block
 * scales 1 and codes 0. A block scale that underflows to e4m3 zero (a block
 * below about 2^-10 / 448 of the tensor's amax) gives x / 0 = +-inf, or NaN
 * for x = 0, hence codes 7 and 15, which dequantise to 0, as ModelOpt's do.
 *
 * The 128x4 swizzled scale layout of CUTLASS-style kernels: the scales of one
 * tensor, [rows, kcols] with kcols = cols/16, become [mTiles, kTiles, 32, 4, 4]
 * bytes with rows padded to 128 and scale columns to 4 (padding bytes zero):
 *   offset(m, k) = mTile*(kTiles*512) + kTile*512 + (m%32)*16 + ((m%128)/32)*4 + k%4
 *   mTile = m/128, kTile = k/4, kTiles = ceil(kcols/4)
 *
 * The MoE layer (routed experts only)
 *   x      bf16  [T, H]        tokens
 *   ids    int32 [T, k]        the k experts of each token (0 <= id < E)
 *   tw     f32   [T, k]        their weights
 *   w13    NVFP4 [E, 2I, H]    per expert: rows 0..I-1 are the gate projection
 *                              (w1), rows I..2I-1 the up projection (w3);
 *                              one s2 per expert for all 2I rows
 *   w2     NVFP4 [E, H, I]     per expert: the down projection, one s2 each
 *   out    bf16  [T, H]
 * For each token t and slot j, with e = ids[t][j]:
 *   gate_i = sum_h x[t][h] * W13[e][i][h],  up_i = sum_h x[t][h] * W13[e][I+i][h]
 *   h_i    = bf16(silu(gate_i) * up_i),     silu(g) = g / (1 + exp(-g))
 *   out[t][n] = bf16(sum_j tw[t][j] * sum_i h_i * W2[e][n][i])
 * computed in float64 from the dequantised weights (exact in float64) and the
 * bf16 inputs; the sums run in index order, slot j outermost.
 *
 * Generators (deterministic from a seed; value i of a stream is a pure function
 * of (seed, i), the counter-based scheme of kwb's core/rng.c, reproduced here
 * bit for bit so that device fills can match):
 *   weights  v_i = std * normal(seed, i), times `outlier_scale` where
 *            u01(seed, i) < outlier_rate; stored as bf16 (round to nearest
 *            even). The recipe's rule: std 0.02, rate 1/1000, scale 10.
 *   routing  per token t and slot j, u = u01(seed, t*k + j).
 *            uniform: a partial Fisher-Yates shuffle of 0..E-1 restarted for
 *            every token; slot j takes position j + floor(u * (E - j)).
 *            skewed: expert e is drawn with probability proportional to
 *            1/(e+1) among the experts the token does not have yet (expert 0
 *            the most popular): the first e whose running sum of 1/(e'+1)
 *            over the remaining experts exceeds u * (their total).
 *            weights: r_j = 0.5 + u01(seed ^ 0x7477, t*k + j), normalised to
 *            sum to 1 over the token's k slots.
 *
 * Return values: 0, or a negative error (see the NVFP4_E* values below).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum {
    NVFP4_ESHAPE = -1,      /* a size is out of range, or cols is not a multiple of 16 */
    NVFP4_ENONFINITE = -2,  /* a weight to quantise is NaN or infinite */
    NVFP4_ENOMEM = -3,      /* out of memory */
    NVFP4_EEXPERT = -4,     /* an expert id is outside 0..E-1 */
};

/* ---- scalar conversions ------------------------------------------------ */

/* Round a > 0 to `mant` fraction bits, with exponents below emin treated as
 * emin (the subnormal range), to nearest with ties to even. */
static double round_grid(double a, int mant, int emin) {
    int e = ilogb(a);
    if (e < emin) e = emin;
    double quantum = ldexp(1.0, e - mant);
    return nearbyint(a / quantum) * quantum;
}

unsigned nvfp4_e4m3_from_f64(double x);
unsigned nvfp4_e4m3_from_f64(double x) {
    if (isnan(x)) return 0x7f;
    unsigned sign = signbit(x) ? 0x80u : 0u;
    double a = fabs(x);
    if (a >= 448.0) return sign | 0x7eu;
    if (a == 0.0) return sign;
    double r = round_grid(a, 3, -6);
    if (r == 0.0) return sign;
    int e = ilogb(r);
    if (e < -6) return sign | (unsigned)ldexp(r, 9);          /* subnormal: r / 2^-9 */
    unsigned m = (unsigned)(ldexp(r, -e) * 8.0) - 8u;          /* 1.m x 2^e */
    return sign | (unsigned)(e + 7) << 3 | m;
}

double nvfp4_e4m3_to_f64(unsigned code);
double nvfp4_e4m3_to_f64(unsigned code) {
    code &= 0xffu;
    if ((code & 0x7fu) == 0x7fu) return NAN;
    unsigned e = (code >> 3) & 15u, m = code & 7u;
    double v = e == 0 ? ldexp((double)m, -9) : ldexp(1.0 + m / 8.0, (int)e - 7);
    return code & 0x80u ? -v : v;
}

unsigned nvfp4_e2m1_from_f64(double y);
unsigned nvfp4_e2m1_from_f64(double y) {
    static const double bounds[7] = {0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0};
    unsigned sign = y < 0 ? 8u : 0u;
    double a = fabs(y);
    if (isnan(a)) return 7u;
    unsigned code = 0;
    while (code < 7 && bounds[code] < a) code++;
    if (a == 0.75 || a == 1.75 || a == 3.5) code++;
    return sign | code;
}

double nvfp4_e2m1_to_f64(unsigned code);
double nvfp4_e2m1_to_f64(unsigned code) {
    static const double mag[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
    double v = mag[code & 7u];
    return code & 8u ? -v : v;
}

static double bf16_to_f64(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* float64 -> bf16, one rounding (to nearest, ties to even); NaN stays NaN. */
uint32_t nvfp4_bf16_from_f64(double x);
uint32_t nvfp4_bf16_from_f64(double x) {
    if (isnan(x)) return 0x7fc0u;
    uint32_t sign = signbit(x) ? 0x8000u : 0u;
    double a = fabs(x);
    if (a == 0.0) return sign;
    double r = isinf(a) ? a : round_grid(a, 7, -126);
    if (r >= 0x1p128) return sign | 0x7f80u;
    float f = (float)r;                                  /* exact */
    uint32_t u;
    memcpy(&u, &f, 4);
    return sign | (u >> 16);
}

/* ---- quantiser, dequantiser, scale layouts ------------------------------ */

int nvfp4_quantize(int batch, int rows, int cols, const uint16_t *w, uint8_t *q,
                   uint8_t *sf, float *s2);
int nvfp4_quantize(int batch, int rows, int cols, const uint16_t *w, uint8_t *q,
                   uint8_t *sf, float *s2) {
    if (batch < 0 || rows < 0 || cols < 0 || cols % 16) return NVFP4_ESHAPE;
    size_t per = (size_t)rows * (size_t)cols, nblk = (size_t)cols / 16;
    for (int b = 0; b < batch; b++) {
        const uint16_t *wb = w + (size_t)b * per;
        uint8_t *qb = q + (size_t)b * per / 2, *sfb = sf + (size_t)b * rows * nblk;
        float amax = 0.0f;
        for (size_t i = 0; i < per; i++) {
            float v = (float)bf16_to_f64(wb[i]);
            if (!isfinite(v)) return NVFP4_ENONFINITE;
            if (fabsf(v) > amax) amax = fabsf(v);
        }
        float gs = amax > 0.0f ? amax / 2688.0f : 1.0f;
        float six_gs = 6.0f * gs;
        s2[b] = gs;
        for (size_t r = 0; r < (size_t)rows; r++)
            for (size_t k = 0; k < nblk; k++) {
                const uint16_t *x = wb + r * (size_t)cols + 16 * k;
                float bmax = 0.0f;
                for (int i = 0; i < 16; i++) {
                    float v = fabsf((float)bf16_to_f64(x[i]));
                    if (v > bmax) bmax = v;
                }
                float ratio = amax > 0.0f ? bmax / six_gs : 0.0f;
                if (ratio == 0.0f) ratio = 1.0f;
                unsigned code = nvfp4_e4m3_from_f64(ratio);
                sfb[r * nblk + k] = (uint8_t)code;
                float denom = (float)nvfp4_e4m3_to_f64(code) * gs;
                uint8_t *qo = qb + (r * (size_t)cols + 16 * k) / 2;
                for (int i = 0; i < 16; i += 2) {
                    float y0 = (float)bf16_to_f64(x[i]) / denom;
                    float y1 = (float)bf16_to_f64(x[i + 1]) / denom;
                    qo[i / 2] = (uint8_t)(nvfp4_e2m1_from_f64(y0) | nvfp4_e2m1_from_f64(y1) << 4);
                }
            }
    }
    return 0;
}

int nvfp4_dequantize(int batch, int rows, int cols, const uint8_t *q, const uint8_t *sf,
                     const float *s2, double *out);
int nvfp4_dequantize(int batch, int rows, int cols, const uint8_t *q, const uint8_t *sf,
                     const float *s2, double *out) {
    if (batch < 0 || rows < 0 || cols < 0 || cols % 16) return NVFP4_ESHAPE;
    size_t per = (size_t)rows * (size_t)cols, nblk = (size_t)cols / 16;
    for (int b = 0; b < batch; b++)
        for (size_t r = 0; r < (size_t)rows; r++)
            for (size_t c = 0; c < (size_t)cols; c++) {
                size_t i = (size_t)b * per + r * (size_t)cols + c;
                unsigned code = c % 2 ? q[i / 2] >> 4 : q[i / 2] & 15u;
                double scale = nvfp4_e4m3_to_f64(sf[((size_t)b * rows + r) * nblk + c / 16]);
                out[i] = nvfp4_e2m1_to_f64(code) * scale * (double)s2[b];
            }
    return 0;
}

int64_t nvfp4_sf_swizzled_offset(int m, int k, int kcols);
int64_t nvfp4_sf_swizzled_offset(int m, int k, int kcols) {
    int64_t ktiles = (kcols + 3) / 4;
    return (int64_t)(m / 128) * ktiles * 512 + (int64_t)(k / 4) * 512 + (m % 32) * 16
         + ((m % 128) / 32) * 4 + k % 4;
}

/* Bytes of one tensor's swizzled scales: rows padded to 128, columns to 4. */
int64_t nvfp4_sf_swizzled_size(int rows, int kcols);
int64_t nvfp4_sf_swizzled_size(int rows, int kcols) {
    return (int64_t)((rows + 127) / 128 * 128) * ((kcols + 3) / 4 * 4);
}

int nvfp4_sf_swizzle(int batch, int rows, int kcols, const uint8_t *lin, uint8_t *swz);
int nvfp4_sf_swizzle(int batch, int rows, int kcols, const uint8_t *lin, uint8_t *swz) {
    if (batch < 0 || rows < 0 || kcols < 0) return NVFP4_ESHAPE;
    size_t per = (size_t)nvfp4_sf_swizzled_size(rows, kcols);
    memset(swz, 0, per * (size_t)batch);
    for (int b = 0; b < batch; b++)
        for (int m = 0; m < rows; m++)
            for (int k = 0; k < kcols; k++)
                swz[b * per + (size_t)nvfp4_sf_swizzled_offset(m, k, kcols)] =
                    lin[((size_t)b * rows + m) * kcols + k];
    return 0;
}

int nvfp4_sf_unswizzle(int batch, int rows, int kcols, const uint8_t *swz, uint8_t *lin);
int nvfp4_sf_unswizzle(int batch, int rows, int kcols, const uint8_t *swz, uint8_t *lin) {
    if (batch < 0 || rows < 0 || kcols < 0) return NVFP4_ESHAPE;
    size_t per = (size_t)nvfp4_sf_swizzled_size(rows, kcols);
    for (int b = 0; b < batch; b++)
        for (int m = 0; m < rows; m++)
            for (int k = 0; k < kcols; k++)
                lin[((size_t)b * rows + m) * kcols + k] =
                    swz[b * per + (size_t)nvfp4_sf_swizzled_offset(m, k, kcols)];
    return 0;
}

/* ---- the MoE layer ------------------------------------------------------ */

/* Dequantise row r of expert e's NVFP4 tensor [rows, cols] into out[cols]. */
static void dequant_row(const uint8_t *q, const uint8_t *sf, const float *s2, int rows,
                        int cols, int e, int r, double *out) {
    size_t row = (size_t)e * rows + (size_t)r;
    const uint8_t *qr = q + row * (size_t)cols / 2, *sr = sf + row * (size_t)cols / 16;
    for (int c = 0; c < cols; c++) {
        unsigned code = c % 2 ? qr[c / 2] >> 4 : qr[c / 2] & 15u;
        out[c] = nvfp4_e2m1_to_f64(code) * nvfp4_e4m3_to_f64(sr[c / 16]) * (double)s2[e];
    }
}

int nvfp4_moe_ref(int T, int H, int I, int E, int K, const uint16_t *x, const int32_t *ids,
                  const float *tw, const uint8_t *w13q, const uint8_t *w13sf,
                  const float *w13s2, const uint8_t *w2q, const uint8_t *w2sf,
                  const float *w2s2, uint16_t *out, double *out64);
int nvfp4_moe_ref(int T, int H, int I, int E, int K, const uint16_t *x, const int32_t *ids,
                  const float *tw, const uint8_t *w13q, const uint8_t *w13sf,
                  const float *w13s2, const uint8_t *w2q, const uint8_t *w2sf,
                  const float *w2s2, uint16_t *out, double *out64) {
    if (T < 0 || H < 16 || I < 16 || H % 16 || I % 16 || E < 1 || K < 1) return NVFP4_ESHAPE;
    for (size_t i = 0; i < (size_t)T * K; i++)
        if (ids[i] < 0 || ids[i] >= E) return NVFP4_EEXPERT;
    int wide = H > I ? H : I;
    double *xt = malloc(sizeof(double) * H), *wrow = malloc(sizeof(double) * wide);
    double *h = malloc(sizeof(double) * I), *acc = malloc(sizeof(double) * H);
    if (!xt || !wrow || !h || !acc) {
        free(xt); free(wrow); free(h); free(acc);
        return NVFP4_ENOMEM;
    }
    for (int t = 0; t < T; t++) {
        for (int c = 0; c < H; c++) xt[c] = bf16_to_f64(x[(size_t)t * H + c]);
        for (int n = 0; n < H; n++) acc[n] = 0.0;
        for (int j = 0; j < K; j++) {
            int e = ids[(size_t)t * K + j];
            for (int i = 0; i < I; i++) {
                double gate = 0.0, up = 0.0;
                dequant_row(w13q, w13sf, w13s2, 2 * I, H, e, i, wrow);
                for (int c = 0; c < H; c++) gate += xt[c] * wrow[c];
                dequant_row(w13q, w13sf, w13s2, 2 * I, H, e, I + i, wrow);
                for (int c = 0; c < H; c++) up += xt[c] * wrow[c];
                h[i] = bf16_to_f64((uint16_t)nvfp4_bf16_from_f64(gate / (1.0 + exp(-gate)) * up));
            }
            double wt = tw[(size_t)t * K + j];
            for (int n = 0; n < H; n++) {
                double d = 0.0;
                dequant_row(w2q, w2sf, w2s2, H, I, e, n, wrow);
                for (int i = 0; i < I; i++) d += h[i] * wrow[i];
                acc[n] += wt * d;
            }
        }
        for (int n = 0; n < H; n++) {
            out[(size_t)t * H + n] = (uint16_t)nvfp4_bf16_from_f64(acc[n]);
            if (out64) out64[(size_t)t * H + n] = acc[n];
        }
    }
    free(xt); free(wrow); free(h); free(acc);
    return 0;
}

/* ---- generators --------------------------------------------------------- */

/* The counter-based stream of kwb's core/rng.c: a splitmix64 finaliser over
 * the seed and the index. Value i of stream seed depends on nothing else. */
static uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rng_bits(uint64_t seed, uint64_t i) {
    return mix(mix(seed + 0x9e3779b97f4a7c15ull) ^ (i * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull));
}

static double rng_u01(uint64_t seed, uint64_t i) {
    return (double)(rng_bits(seed, i) >> 11) * 0x1.0p-53;
}

static double rng_normal(uint64_t seed, uint64_t i) {   /* Box-Muller */
    double u1 = ((double)(rng_bits(seed ^ 0x5851f42d4c957f2dull, 2 * i) >> 11) + 1.0) * 0x1.0p-53;
    double u2 = rng_u01(seed ^ 0x5851f42d4c957f2dull, 2 * i + 1);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

int nvfp4_gen_weights(uint64_t seed, int64_t n, double std, double outlier_rate,
                      double outlier_scale, uint16_t *out);
int nvfp4_gen_weights(uint64_t seed, int64_t n, double std, double outlier_rate,
                      double outlier_scale, uint16_t *out) {
    if (n < 0 || !(std >= 0) || !(outlier_rate >= 0 && outlier_rate <= 1)) return NVFP4_ESHAPE;
    for (int64_t i = 0; i < n; i++) {
        double v = std * rng_normal(seed, (uint64_t)i);
        if (rng_u01(seed, (uint64_t)i) < outlier_rate) v *= outlier_scale;
        out[i] = (uint16_t)nvfp4_bf16_from_f64(v);
    }
    return 0;
}

int nvfp4_gen_routing(uint64_t seed, int T, int E, int K, int skewed, int32_t *ids, float *tw);
int nvfp4_gen_routing(uint64_t seed, int T, int E, int K, int skewed, int32_t *ids, float *tw) {
    if (T < 0 || E < 1 || K < 1 || K > E) return NVFP4_ESHAPE;
    int *perm = malloc(sizeof(int) * (size_t)E);
    unsigned char *taken = malloc((size_t)E);
    if (!perm || !taken) {
        free(perm); free(taken);
        return NVFP4_ENOMEM;
    }
    for (int t = 0; t < T; t++) {
        int32_t *id = ids + (size_t)t * K;
        for (int e = 0; e < E; e++) { perm[e] = e; taken[e] = 0; }
        for (int j = 0; j < K; j++) {
            double u = rng_u01(seed, (uint64_t)t * (uint64_t)K + (uint64_t)j);
            if (!skewed) {
                int r = j + (int)(u * (E - j));
                int tmp = perm[j]; perm[j] = perm[r]; perm[r] = tmp;
                id[j] = perm[j];
            } else {
                double total = 0.0, run = 0.0;
                int pick = -1;
                for (int e = 0; e < E; e++) if (!taken[e]) total += 1.0 / (e + 1);
                for (int e = 0; e < E; e++) {
                    if (taken[e]) continue;
                    pick = e;                   /* the last free one, should rounding leave u*total unreached */
                    run += 1.0 / (e + 1);
                    if (run > u * total) break;
                }
                taken[pick] = 1;
                id[j] = pick;
            }
        }
        double sum = 0.0;   /* the weights' stream is a pure function: draw it twice */
        uint64_t base = (uint64_t)t * (uint64_t)K;
        for (int j = 0; j < K; j++) sum += 0.5 + rng_u01(seed ^ 0x7477ull, base + (uint64_t)j);
        for (int j = 0; j < K; j++)
            tw[base + (uint64_t)j] = (float)((0.5 + rng_u01(seed ^ 0x7477ull, base + (uint64_t)j)) / sum);
    }
    free(perm); free(taken);
    return 0;
}
