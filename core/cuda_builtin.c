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

/* The kernels' sources are core/cuda/kwb_builtin.cu and core/cuda/kwb_wmma.cu,
 * compiled into the binary as kwb_cuda_builtin_source and kwb_cuda_wmma_source
 * (tools/embed.c -> build/cuda_sources.c). Their bytes, with the name and the
 * flags below, are the key of their builds, so the files hold no comments;
 * what they do is told here.
 *
 * kwb_builtin.cu: the counter-based generator is rng.c's, bit for bit
 * (rng_bits, rng_u01, rng_normal); the conversions are dtype.c's rounding (to
 * nearest even); FMA contraction is off (--fmad=false) so lo + (hi - lo) * u
 * rounds as on the host. rng_normal_f is the stream the timed runs draw from:
 * the same distribution from one hash an element and single-precision math,
 * at the memory's pace. e4m3 (OCP FP8): bias 7, no infinities, S.1111.111 is
 * NaN, saturating at 448. e2m1 (OCP FP4): 0, 0.5, 1, 1.5, 2, 3, 4, 6; ties to
 * the even code.
 *   kwb_fill(p, dt, n, seed, a, b, mode): mode 0 uniform in [a, b), 1 normal
 *     (mean a, stdev b), 2 the value a, 3 normal from the fast stream
 *   kwb_fill64(p, n, bits): every 8-byte word set to bits (f64 poison)
 *   kwb_compare(out, dto, ref, dtr, n, atol, rtol, r): r = max_abs, max_rel
 *     (as bits), sum d^2, sum ref^2, nan, inf, poison, bad, first_bad,
 *     ref_nonfinite, sum ref
 *   kwb_checksum(p, bytes, key, out): the sum of mixed 8-byte words
 *   kwb_poisoned(p, dt, n, r): elements still poison, r[0] their count, r[1]
 *     the first
 *   kwb_guard(before, nb, after, na, pattern, fill, r): a buffer's guard
 *     bands, nb bytes before it and na after, as one zone (index i: before,
 *     then after) of bytes drawn from the pattern: filled, or checked (r[0]
 *     the first index that differs, r[1] the last)
 *   kwb_guards(z, r): many buffers' guard bands at once: block row y checks
 *     buffer y, its zones given as z[5y..5y+4] = before, nb, after, na, pattern
 *   kwb_zones(z, ng, r): after a call, in one launch: block rows y < ng check
 *     buffer y's guard bands (z[5y..5y+4] as kwb_guards takes them); the rows
 *     after count the elements of output y - ng still poison (z[5y..5y+2] =
 *     data, dtype, n; r[2y] the count, r[2y+1] the first)
 *   kwb_flush_read(p, n, sink): reads the L2 flush buffer, leaving L2 full of
 *     clean lines of it, so the timed kernel pays no write-back of a flush
 *   kwb_fma(out, iters, seed): 8 independent FMA chains a thread; the result
 *     is kept alive by a store that never happens for real inputs
 *
 * kwb_wmma.cu: the tensor-core probe, kwb_wmma_bf16(out, iters), four
 * accumulators a warp (distinct, or the compiler merges the four chains into
 * one). It needs the CUDA headers (mma.h), so it is a module of its own,
 * built only when cuBLAS is missing. */

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
