/* buffer.c: typed host buffers between redzones and guard pages, in shared
 * memory a sandbox maps too; seeded fills, poison, checksums */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

#include "error.h"
#include "kwb.h"
#include "rng.h"

/* A buffer's memory: [guard page][redzone][data][redzone][guard page]. The
 * redzones (one page before the data, at least one after its last byte) hold
 * a pattern of the buffer's own, so a kernel's write just outside its buffer
 * is found afterwards (kwb_buffer_redzone), and the guard pages (no access)
 * stop one that goes further at once, as a fault in the kernel's process.
 * Redzones and data are a memfd (the shared part): a sandbox maps the same
 * bytes between guard pages of its own (core/sandbox.c). */
struct kwb_buffer {
    kwb_dtype dtype;
    uint64_t n;
    void *data;
    unsigned char *map;   /* the whole mapping */
    size_t map_bytes, after;   /* its size; the redzone bytes after the data */
    uint64_t pattern;     /* seed of the redzones' bytes */
    uint64_t serial;      /* unique in this process: what a sandbox knows it by */
    int fd;               /* the memfd of redzones and data */
};

#define REDZONE 4096

static size_t page_size(void) {
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096;
}

static unsigned char zone_byte(uint64_t pattern, size_t i) {
    uint64_t x = pattern ^ (i * 0x9E3779B97F4A7C15ull);
    x ^= x >> 29;
    x *= 0xBF58476D1CE4E5B9ull;
    return (unsigned char)(x >> 56);
}

static void zone_fill(const kwb_buffer *b) {
    unsigned char *before = (unsigned char *)b->data - REDZONE, *after = (unsigned char *)b->data + kwb_buffer_bytes(b);
    for (size_t i = 0; i < REDZONE; i++) before[i] = zone_byte(b->pattern, i);
    for (size_t i = 0; i < b->after; i++) after[i] = zone_byte(b->pattern, REDZONE + i);
}

/* A mapping at a random address where one is free, so no buffer's place
 * follows from another's: a kernel cannot reach the judge's copies by an
 * offset from its own arguments (a wrong guess faults). The range lies above
 * what AddressSanitizer reserves on x86-64. Else wherever the kernel puts it. */
static void *map_somewhere(size_t bytes, size_t page) {
    const int prot = PROT_NONE, flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
#ifdef MAP_FIXED_NOREPLACE
    for (int tries = 0; tries < 8; tries++) {
        uint64_t r;
        if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r) break;
        uintptr_t lo = (uintptr_t)0x200000000000ull, span = (uintptr_t)0x400000000000ull;
        void *hint = (void *)((lo + (uintptr_t)(r % span)) & ~(uintptr_t)(page - 1));
        void *m = mmap(hint, bytes, prot, flags | MAP_FIXED_NOREPLACE, -1, 0);
        if (m == hint) return m;
        if (m != MAP_FAILED) munmap(m, bytes);   /* an old kernel took it as a hint */
        if (errno == ENOMEM && m == MAP_FAILED && tries > 2) break;
    }
#endif
    return mmap(NULL, bytes, prot, flags, -1, 0);
}

kwb_buffer *kwb_buffer_new(kwb_dtype t, uint64_t n) {
    static _Atomic uint64_t serials;
    if ((unsigned)t >= KWB_DTYPE_COUNT) { kwb_fail(KWB_EINVAL, "unknown dtype %d", (int)t); return NULL; }
    size_t es = kwb_dtype_size(t), page = page_size();
    if (n > (SIZE_MAX - 8 * (size_t)REDZONE) / es / 2) {
        kwb_fail(KWB_ENOMEM, "buffer of %llu elements is too large", (unsigned long long)n);
        return NULL;
    }
    kwb_buffer *b = calloc(1, sizeof *b);
    if (!b) { kwb_fail(KWB_ENOMEM, "out of memory"); return NULL; }
    size_t bytes = n * es;
    /* the data starts a page after the first guard (page- hence 64-byte aligned) */
    size_t body = (bytes + REDZONE + page - 1) / page * page;   /* data and at least REDZONE after it */
    size_t shared = REDZONE + body;
    b->map_bytes = page + shared + page;
    /* A memfd past the process's file size limit (a worker's is 1 GiB) cannot
     * be made (main() ignores SIGXFSZ, so ftruncate says EFBIG): such a
     * buffer is private memory, which no sandbox can be given. */
    b->fd = memfd_create("kwb-buffer", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (b->fd >= 0 && ftruncate(b->fd, (off_t)shared) != 0) {
        close(b->fd);
        b->fd = -1;
    }
    if (b->fd >= 0) fcntl(b->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
    void *m = map_somewhere(b->map_bytes, page);   /* the reservation; its middle is the memory */
    void *mid = MAP_FAILED;
    if (m != MAP_FAILED)
        mid = b->fd >= 0 ? mmap((unsigned char *)m + page, shared, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, b->fd, 0)
                         : mmap((unsigned char *)m + page, shared, PROT_READ | PROT_WRITE,
                                MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (mid == MAP_FAILED) {
        if (m != MAP_FAILED) munmap(m, b->map_bytes);
        if (b->fd >= 0) close(b->fd);
        free(b);
        kwb_fail(KWB_ENOMEM, "out of memory allocating %zu bytes", bytes);
        return NULL;
    }
    b->map = m;
    b->data = b->map + page + REDZONE;
    b->after = body - bytes;
    b->dtype = t;
    b->n = n;
    b->serial = ++serials;
    b->pattern = (uint64_t)(uintptr_t)b->data * 0x2545F4914F6CDD1Dull ^ n;
    zone_fill(b);   /* the data is zero: a fresh memfd */
    return b;
}

int kwb_buffer_share(const kwb_buffer *b, kwb_buffer_shared *s) {
    if (b->fd < 0)
        return kwb_fail(KWB_EINVAL, "a buffer of %zu bytes is not in shared memory (it passes this process's file "
                        "size limit), so no sandbox can be given it", kwb_buffer_bytes(b));
    s->fd = b->fd;
    s->bytes = b->map_bytes - 2 * page_size();
    s->data_offset = REDZONE;
    s->serial = b->serial;
    return 0;
}

int kwb_buffer_redzone(kwb_buffer *b, int64_t *first, int64_t *last) {
    const unsigned char *before = (unsigned char *)b->data - REDZONE;
    const unsigned char *after = (unsigned char *)b->data + kwb_buffer_bytes(b);
    int64_t lo = 0, hi = 0;
    int hit = 0;
    for (size_t i = 0; i < REDZONE; i++)
        if (before[i] != zone_byte(b->pattern, i)) {
            int64_t off = (int64_t)i - REDZONE;
            if (!hit) lo = off;
            hi = off, hit = 1;
        }
    for (size_t i = 0; i < b->after; i++)
        if (after[i] != zone_byte(b->pattern, REDZONE + i)) {
            int64_t off = (int64_t)(kwb_buffer_bytes(b) + i);
            if (!hit) lo = off;
            hi = off, hit = 1;
        }
    if (hit) zone_fill(b);   /* intact again for the next check */
    if (first) *first = lo;
    if (last) *last = hi;
    return hit;
}

void kwb_buffer_free(kwb_buffer *b) {
    if (!b) return;
    munmap(b->map, b->map_bytes);
    if (b->fd >= 0) close(b->fd);
    free(b);
}

void *kwb_buffer_data(const kwb_buffer *b) { return b->data; }
uint64_t kwb_buffer_len(const kwb_buffer *b) { return b->n; }
kwb_dtype kwb_buffer_dtype(const kwb_buffer *b) { return b->dtype; }
size_t kwb_buffer_bytes(const kwb_buffer *b) { return (size_t)b->n * kwb_dtype_size(b->dtype); }

double kwb_buffer_get(const kwb_buffer *b, uint64_t i) {
    const void *p = b->data;
    switch (b->dtype) {
    case KWB_F32: return ((const float *)p)[i];
    case KWB_F64: return ((const double *)p)[i];
    case KWB_F16: return kwb_f16_to_f32(((const uint16_t *)p)[i]);
    case KWB_BF16: return kwb_bf16_to_f32(((const uint16_t *)p)[i]);
    case KWB_I8: return ((const int8_t *)p)[i];
    case KWB_I32: return ((const int32_t *)p)[i];
    case KWB_I64: return (double)((const int64_t *)p)[i];
    case KWB_U8: return ((const uint8_t *)p)[i];
    case KWB_U32: return ((const uint32_t *)p)[i];
    case KWB_U64: return (double)((const uint64_t *)p)[i];
    default: return NAN;
    }
}

/* Integers are converted with saturation so an out-of-range value never
 * becomes undefined behaviour. */
static double clampd(double v, double lo, double hi) {
    if (isnan(v)) return 0;
    return v < lo ? lo : v > hi ? hi : v;
}

void kwb_buffer_set(kwb_buffer *b, uint64_t i, double v) {
    void *p = b->data;
    switch (b->dtype) {
    case KWB_F32: ((float *)p)[i] = (float)v; break;
    case KWB_F64: ((double *)p)[i] = v; break;
    case KWB_F16: ((uint16_t *)p)[i] = kwb_f32_to_f16((float)v); break;
    case KWB_BF16: ((uint16_t *)p)[i] = kwb_f32_to_bf16((float)v); break;
    case KWB_I8: ((int8_t *)p)[i] = (int8_t)clampd(v, INT8_MIN, INT8_MAX); break;
    case KWB_I32: ((int32_t *)p)[i] = (int32_t)clampd(v, INT32_MIN, INT32_MAX); break;
    case KWB_I64: ((int64_t *)p)[i] = (int64_t)clampd(v, -9223372036854775808.0, 9223372036854774784.0); break;
    case KWB_U8: ((uint8_t *)p)[i] = (uint8_t)clampd(v, 0, UINT8_MAX); break;
    case KWB_U32: ((uint32_t *)p)[i] = (uint32_t)clampd(v, 0, UINT32_MAX); break;
    case KWB_U64: ((uint64_t *)p)[i] = (uint64_t)clampd(v, 0, 18446744073709549568.0); break;
    default: break;
    }
}

int kwb_buffer_fill_uniform(kwb_buffer *b, uint64_t seed, double lo, double hi) {
    if (!(lo <= hi)) return kwb_fail(KWB_EINVAL, "uniform fill needs lo <= hi (got %g, %g)", lo, hi);
    int is_float = kwb_dtype_is_float(b->dtype);
    double ilo = ceil(lo), span = floor(hi) - ceil(lo) + 1;
    if (!is_float && span < 1) return kwb_fail(KWB_EINVAL, "no integer lies in [%g, %g]", lo, hi);
    for (uint64_t i = 0; i < b->n; i++) {
        double u = kwb_rng_u01(seed, i);
        if (is_float) kwb_buffer_set(b, i, lo + (hi - lo) * u);
        else kwb_buffer_set(b, i, ilo + floor(u * span));
    }
    return 0;
}

int kwb_buffer_fill_normal(kwb_buffer *b, uint64_t seed, double mean, double stdev) {
    if (!(stdev >= 0)) return kwb_fail(KWB_EINVAL, "normal fill needs stdev >= 0 (got %g)", stdev);
    for (uint64_t i = 0; i < b->n; i++)
        kwb_buffer_set(b, i, mean + stdev * kwb_rng_normal(seed, i));
    return 0;
}

/* The same distribution from one sequential stream, several times faster
 * than the counter-based fill, for inputs drawn afresh before every timed
 * run (they need the distribution, not the counter's values): xorshift64*
 * and Marsaglia and Tsang's ziggurat ("The Ziggurat Method for Generating
 * Random Variables", J. Stat. Software 5(8), 2000), 128 layers, the layer
 * from a draw's low 7 bits and the value from its high 32 (independent
 * bits), the tail past r by their exponential method. */
enum { ZIG_LAYERS = 128 };
static uint32_t zig_k[ZIG_LAYERS];
static double zig_w[ZIG_LAYERS], zig_f[ZIG_LAYERS];

static void zig_tables(void) {
    const double m = 2147483648.0, v = 9.91256303526217e-3;
    double d = 3.442619855899, t = d, q = v / exp(-0.5 * d * d);
    zig_k[0] = (uint32_t)((d / q) * m);
    zig_k[1] = 0;
    zig_w[0] = q / m;
    zig_w[ZIG_LAYERS - 1] = d / m;
    zig_f[0] = 1.0;
    zig_f[ZIG_LAYERS - 1] = exp(-0.5 * d * d);
    for (int i = ZIG_LAYERS - 2; i >= 1; i--) {
        d = sqrt(-2 * log(v / d + exp(-0.5 * d * d)));
        zig_k[i + 1] = (uint32_t)((d / t) * m);
        t = d;
        zig_f[i] = exp(-0.5 * d * d);
        zig_w[i] = d / m;
    }
}

static uint64_t stream_next(uint64_t *x) {
    *x ^= *x >> 12;
    *x ^= *x << 25;
    *x ^= *x >> 27;
    return *x * 0x2545F4914F6CDD1Dull;
}

static double stream_u01(uint64_t *x) { return (double)(stream_next(x) >> 11) * 0x1.0p-53; }

static double zig_normal(uint64_t *x) {
    const double r = 3.442619855899;
    for (;;) {
        uint64_t bits = stream_next(x);
        int i = (int)(bits & (ZIG_LAYERS - 1));
        int32_t h = (int32_t)(uint32_t)(bits >> 32);
        uint32_t mag = h < 0 ? (uint32_t)(-(int64_t)h) : (uint32_t)h;
        double v = h * zig_w[i];
        if (mag < zig_k[i]) return v;
        if (i == 0) {   /* the tail beyond r */
            double a, y;
            do {
                a = -log(1 - stream_u01(x)) / r;
                y = -log(1 - stream_u01(x));
            } while (y + y < a * a);
            return h > 0 ? r + a : -r - a;
        }
        if (zig_f[i] + stream_u01(x) * (zig_f[i - 1] - zig_f[i]) < exp(-0.5 * v * v)) return v;
    }
}

int kwb_buffer_fill_normal_stream(kwb_buffer *b, uint64_t seed, double mean, double stdev) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    if (!(stdev >= 0)) return kwb_fail(KWB_EINVAL, "normal fill needs stdev >= 0 (got %g)", stdev);
    pthread_once(&once, zig_tables);
    uint64_t x = kwb_rng_bits(seed, 0) | 1;
    if (b->dtype == KWB_F32) {   /* the common case, stored directly */
        float *p = b->data;
        for (uint64_t i = 0; i < b->n; i++) p[i] = (float)(mean + stdev * zig_normal(&x));
        return 0;
    }
    for (uint64_t i = 0; i < b->n; i++) kwb_buffer_set(b, i, mean + stdev * zig_normal(&x));
    return 0;
}

void kwb_buffer_fill_value(kwb_buffer *b, double v) {
    for (uint64_t i = 0; i < b->n; i++) kwb_buffer_set(b, i, v);
}

/* The poison bit patterns: signalling NaNs with a recognisable payload, which
 * no arithmetic produces (arithmetic on NaN yields quiet NaNs). */
static uint64_t poison_bits(kwb_dtype t) {
    switch (t) {
    case KWB_F32: return 0x7fa5a5a5u;
    case KWB_F64: return 0x7ff4a5a5a5a5a5a5ull;
    case KWB_F16: return 0x7d5au;
    case KWB_BF16: return 0x7fa5u;
    default: return 0xa5a5a5a5a5a5a5a5ull;
    }
}

void kwb_buffer_poison(kwb_buffer *b) {
    size_t es = kwb_dtype_size(b->dtype);
    uint64_t bits = poison_bits(b->dtype);
    unsigned char *p = b->data;
    if (es == 4) {   /* the common sizes, a loop the compiler vectorises */
        uint32_t w = (uint32_t)bits, *q = b->data;
        for (uint64_t i = 0; i < b->n; i++) q[i] = w;
        return;
    }
    for (uint64_t i = 0; i < b->n; i++) memcpy(p + i * es, &bits, es); /* little-endian */
}

uint64_t kwb_buffer_poisoned(const kwb_buffer *b, int64_t *first) {
    size_t es = kwb_dtype_size(b->dtype);
    uint64_t bits = poison_bits(b->dtype), count = 0;
    const unsigned char *p = b->data;
    *first = -1;
    for (uint64_t i = 0; i < b->n; i++) {
        uint64_t v = 0;
        memcpy(&v, p + i * es, es);
        if (v == (bits & (es == 8 ? ~0ull : (1ull << (8 * es)) - 1))) {
            if (*first < 0) *first = (int64_t)i;
            count++;
        }
    }
    return count;
}

int kwb_buffer_is_poison(const kwb_buffer *b, uint64_t i) {
    size_t es = kwb_dtype_size(b->dtype);
    uint64_t bits = poison_bits(b->dtype), v = 0;
    memcpy(&v, (const unsigned char *)b->data + i * es, es);
    uint64_t mask = es == 8 ? ~0ull : (1ull << (8 * es)) - 1;
    return v == (bits & mask);
}

int kwb_buffer_copy(kwb_buffer *dst, const kwb_buffer *src) {
    if (dst->dtype != src->dtype || dst->n != src->n)
        return kwb_fail(KWB_EINVAL, "copy needs equal buffers (%s[%llu] from %s[%llu])",
                        kwb_dtype_name(dst->dtype), (unsigned long long)dst->n,
                        kwb_dtype_name(src->dtype), (unsigned long long)src->n);
    memcpy(dst->data, src->data, kwb_buffer_bytes(src));
    return 0;
}

/* A keyed 64-bit digest of the bytes, several GB/s: whoever does not know
 * the key cannot change the bytes and keep it (the judge's per-run check of
 * inputs; the key never leaves the judge). */
uint64_t kwb_buffer_digest(const kwb_buffer *b, uint64_t key) {
    const unsigned char *p = b->data;
    size_t n = kwb_buffer_bytes(b), i = 0;
    uint64_t h = key ^ 0x9E3779B97F4A7C15ull ^ n;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h ^= w * 0xBF58476D1CE4E5B9ull;
        h = ((h << 31) | (h >> 33)) * 0x94D049BB133111EBull;
    }
    for (; i < n; i++) h = (h ^ p[i]) * 0x100000001B3ull;
    h ^= h >> 30;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 27;
    h *= 0x94D049BB133111EBull;
    return h ^ (h >> 31);
}

int kwb_buffer_checksum(const kwb_buffer *b, char *out) {
    return kwb_sha256_hex(b->data, kwb_buffer_bytes(b), out);
}
