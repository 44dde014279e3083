/* cuda_run.c: the CUDA backend's device side: the context and its stream,
 * device facts, buffers, kernels and launchers, launch plans, timing with
 * events and graph replay, NVML clocks. */
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_int.h"
#include "error.h"
#include "kwb.h"
#include "timing.h"

/* ---- context ----------------------------------------------------------- */

static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static kwb_cuda_ctx ctx;
static int ctx_ready;

int kwb_cu_check(CUresult r, const char *what) {
    if (r == CUDA_SUCCESS) return 0;
    char b[200];
    return kwb_fail(r == CUDA_ERROR_OUT_OF_MEMORY ? KWB_ENOMEM : KWB_ERUN, "%s failed: %s", what,
                    kwb_cu_errstr(r, b, sizeof b));
}

int kwb_cuda_device_count(int *n) {
    *n = 0;
    const kwb_cu_api *cu = kwb_cu();
    if (!cu) return KWB_ERUN;
    return kwb_cu_check(cu->DeviceGetCount(n), "cuDeviceGetCount");
}

int kwb_cuda_device_info_get(int ordinal, kwb_cuda_device_info *d) {
    const kwb_cu_api *cu = kwb_cu();
    if (!cu) return KWB_ERUN;
    CUdevice dev;
    int rc = kwb_cu_check(cu->DeviceGet(&dev, ordinal), "cuDeviceGet");
    if (rc) return rc;
    memset(d, 0, sizeof *d);
    d->ordinal = ordinal;
    cu->DeviceGetName(d->name, sizeof d->name, dev);
    cu->DeviceGetPCIBusId(d->pci_bus_id, sizeof d->pci_bus_id, dev);
    static const struct { int attr; size_t off; } attrs[] = {
        {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, offsetof(kwb_cuda_device_info, cc_major)},
        {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, offsetof(kwb_cuda_device_info, cc_minor)},
        {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, offsetof(kwb_cuda_device_info, sms)},
        {CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, offsetof(kwb_cuda_device_info, l2_bytes)},
        {CU_DEVICE_ATTRIBUTE_CLOCK_RATE, offsetof(kwb_cuda_device_info, clock_khz)},
        {CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, offsetof(kwb_cuda_device_info, mem_clock_khz)},
        {CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, offsetof(kwb_cuda_device_info, bus_width)},
        {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, offsetof(kwb_cuda_device_info, smem_optin)},
        {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, offsetof(kwb_cuda_device_info, max_threads)},
        {CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, offsetof(kwb_cuda_device_info, unified_addressing)},
        {CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS, offsetof(kwb_cuda_device_info, pageable_access)},
    };
    for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++) {
        int v = 0;
        cu->DeviceGetAttribute(&v, attrs[i].attr, dev);
        memcpy((char *)d + attrs[i].off, &v, sizeof v);
    }
    size_t mem = 0;
    cu->DeviceTotalMem(&mem, dev);
    d->memory_bytes = mem;
    cu->DriverGetVersion(&d->driver_version);
    return 0;
}

int kwb_cuda_nvrtc_version(int *major, int *minor) {
    const kwb_nvrtc_api *nv = kwb_nvrtc();
    if (!nv) return KWB_EIO;
    *major = nv->major;
    *minor = nv->minor;
    return 0;
}

kwb_cuda_ctx *kwb_cuda_ctx_get(void) {
    pthread_mutex_lock(&ctx_lock);
    if (!ctx_ready) {
        const kwb_cu_api *cu = kwb_cu();
        int rc = cu ? 0 : kwb_last_status(), n = 0;
        if (!rc) rc = kwb_cu_check(cu->DeviceGetCount(&n), "cuDeviceGetCount");
        if (!rc && n == 0) rc = kwb_fail(KWB_ENODEVICE, "no CUDA device: the driver sees no GPU");
        if (!rc) rc = kwb_cu_check(cu->DeviceGet(&ctx.dev, 0), "cuDeviceGet");
        if (!rc) rc = kwb_cu_check(cu->DevicePrimaryCtxRetain(&ctx.ctx, ctx.dev), "cuDevicePrimaryCtxRetain");
        if (!rc) rc = kwb_cu_check(cu->CtxSetCurrent(ctx.ctx), "cuCtxSetCurrent");
        if (!rc) rc = kwb_cu_check(cu->StreamCreate(&ctx.stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
        if (!rc) rc = kwb_cuda_device_info_get(0, &ctx.info);
        if (rc) { pthread_mutex_unlock(&ctx_lock); return NULL; }
        ctx.cu = cu;
        ctx_ready = 1;
    }
    pthread_mutex_unlock(&ctx_lock);
    if (kwb_cu_check(ctx.cu->CtxSetCurrent(ctx.ctx), "cuCtxSetCurrent")) return NULL;
    return &ctx;
}

int kwb_cuda_mem_info(uint64_t *free_bytes, uint64_t *total_bytes) {
    kwb_cuda_ctx *c = kwb_cuda_ctx_get();
    if (!c) return kwb_last_status();
    size_t f = 0, t = 0;
    int rc = kwb_cu_check(c->cu->MemGetInfo(&f, &t), "cuMemGetInfo");
    if (rc) return rc;
    *free_bytes = f;
    *total_bytes = t;
    return 0;
}

/* ---- kernels and launchers --------------------------------------------- */

#define MAX_PARAMS 128

struct kwb_cuda_fn {
    kwb_cuda_module *module;
    CUfunction f;
    int (*launcher)(void **, CUstream);
    int32_t nparams;             /* -1: unknown */
    uint32_t offset[MAX_PARAMS], size[MAX_PARAMS];
    uint32_t smem_set;           /* dynamic shared memory limit set so far */
};

void kwb_cuda_module_unload(kwb_cuda_module *m) {
    if (m->cu && ctx_ready) ctx.cu->ModuleUnload(m->cu);
    m->cu = NULL;
}

kwb_cuda_fn *kwb_cuda_fn_get(kwb_cuda_module *m, const char *name) {
    kwb_cuda_ctx *c = kwb_cuda_ctx_get();
    if (!c) return NULL;
    kwb_cuda_fn *f = calloc(1, sizeof *f);
    if (!f) { kwb_fail(KWB_ENOMEM, "out of memory"); return NULL; }
    f->module = m;
    f->nparams = -1;
    if (m->kind == KWB_CUDA_NVCC) {
        *(void **)&f->launcher = dlsym(m->so, name);
        if (!f->launcher) {
            free(f);
            kwb_fail(KWB_ENOSYM, "no launcher '%s' in %s (is it extern \"C\"?)", name, m->path);
            return NULL;
        }
        return f;
    }
    if (!m->cu && kwb_cu_check(c->cu->ModuleLoadData(&m->cu, m->image), "cuModuleLoadData")) {
        m->cu = NULL;
        free(f);
        return NULL;
    }
    if (c->cu->ModuleGetFunction(&f->f, m->cu, name) != CUDA_SUCCESS) {
        free(f);
        kwb_fail(KWB_ENOSYM, "no kernel '%s' in the module (is it extern \"C\" __global__?)", name);
        return NULL;
    }
    if (c->cu->FuncGetParamInfo) {
        int32_t n = 0;
        size_t off, sz;
        while (n < MAX_PARAMS && c->cu->FuncGetParamInfo(f->f, (size_t)n, &off, &sz) == CUDA_SUCCESS) {
            f->offset[n] = (uint32_t)off;
            f->size[n] = (uint32_t)sz;
            n++;
        }
        f->nparams = n;
    }
    return f;
}

void kwb_cuda_fn_free(kwb_cuda_fn *f) { free(f); }
int kwb_cuda_fn_is_launcher(const kwb_cuda_fn *f) { return f->launcher != NULL; }
int32_t kwb_cuda_fn_nparams(const kwb_cuda_fn *f) { return f->nparams; }

int kwb_cuda_fn_param(const kwb_cuda_fn *f, uint32_t i, uint32_t *offset, uint32_t *size) {
    if (f->nparams < 0 || i >= (uint32_t)f->nparams) return kwb_fail(KWB_EINVAL, "no parameter %u", i);
    *offset = f->offset[i];
    *size = f->size[i];
    return 0;
}

int kwb_cuda_fn_attr(const kwb_cuda_fn *f, int attr, int32_t *value) {
    if (!f->f) return kwb_fail(KWB_EINVAL, "a host launcher has no kernel attributes");
    int v = 0;
    int rc = kwb_cu_check(ctx.cu->FuncGetAttribute(&v, attr, f->f), "cuFuncGetAttribute");
    *value = v;
    return rc;
}

/* ---- buffers ----------------------------------------------------------- */

/* A device buffer's allocation: [guard band][data][guard band]. The bands
 * (GUARD bytes before the data, the rest of the allocation after its last
 * byte, at least GUARD) hold bytes drawn from a pattern of the buffer's own,
 * so a kernel's write just outside its arguments is found afterwards
 * (kwb_cuda_buffer_redzone). */
#define GUARD 4096

struct kwb_cuda_buffer {
    CUdeviceptr base, ptr;
    int dtype;
    uint64_t n;
    size_t bytes, alloc;
    uint64_t pattern;
};

void kwb_cuda_guard_layout(size_t bytes, uint64_t *before, uint64_t *after, size_t *alloc) {
    /* the data 256-byte aligned, and at least GUARD bytes after it */
    *before = GUARD;
    *after = (bytes + 255) / 256 * 256 - bytes + GUARD;
    *alloc = GUARD + bytes + *after;
}

void kwb_cuda_buffer_zones(const kwb_cuda_buffer *b, CUdeviceptr *before, unsigned long long *nb, CUdeviceptr *after,
                           unsigned long long *na, unsigned long long *pattern) {
    *before = b->base;
    *nb = GUARD;
    *after = b->ptr + b->bytes;
    *na = b->alloc - GUARD - b->bytes;
    *pattern = b->pattern;
}

int kwb_cuda_buffer_redzone(kwb_cuda_buffer *b, int *hit, int64_t *first, int64_t *last) {
    *hit = 0;
    return kwb_cuda_guard(b, 0, hit, first, last);
}

const char *kwb_cuda_dtype_name(int t) {
    if (t == KWB_CUDA_E4M3) return "e4m3";
    if (t == KWB_CUDA_E2M1) return "e2m1";
    return kwb_dtype_name((kwb_dtype)t);
}

int kwb_cuda_dtype_from_name(const char *name) {
    if (strcmp(name, "e4m3") == 0) return KWB_CUDA_E4M3;
    if (strcmp(name, "e2m1") == 0) return KWB_CUDA_E2M1;
    return kwb_dtype_from_name(name);
}

static size_t dtype_bytes(int t, uint64_t n) {
    if (t == KWB_CUDA_E4M3) return (size_t)n;
    if (t == KWB_CUDA_E2M1) return (size_t)((n + 1) / 2);
    return (size_t)n * kwb_dtype_size((kwb_dtype)t);
}

kwb_cuda_buffer *kwb_cuda_buffer_new(int dtype, uint64_t n) {
    if (!(dtype == KWB_CUDA_E4M3 || dtype == KWB_CUDA_E2M1 || (dtype >= 0 && dtype < KWB_DTYPE_COUNT))) {
        kwb_fail(KWB_EINVAL, "unknown dtype %d", dtype);
        return NULL;
    }
    kwb_cuda_ctx *c = kwb_cuda_ctx_get();
    if (!c) return NULL;
    kwb_cuda_buffer *b = calloc(1, sizeof *b);
    if (!b) { kwb_fail(KWB_ENOMEM, "out of memory"); return NULL; }
    b->dtype = dtype;
    b->n = n;
    b->bytes = dtype_bytes(dtype, n);
    uint64_t before, after;
    kwb_cuda_guard_layout(b->bytes, &before, &after, &b->alloc);
    CUresult r = c->cu->MemAlloc(&b->base, b->alloc);
    if (r != CUDA_SUCCESS) {
        char e[200];
        kwb_fail(r == CUDA_ERROR_OUT_OF_MEMORY ? KWB_ENOMEM : KWB_ERUN, "cannot allocate %zu bytes on the device: %s",
                 b->bytes, kwb_cu_errstr(r, e, sizeof e));
        free(b);
        return NULL;
    }
    static uint64_t serial;
    b->ptr = b->base + GUARD;
    b->pattern = (uint64_t)b->base * 0x9e3779b97f4a7c15ull ^ ++serial * 0xbf58476d1ce4e5b9ull;
    int hit;
    if (kwb_cuda_guard(b, 1, &hit, NULL, NULL)) {
        c->cu->MemFree(b->base);
        free(b);
        return NULL;
    }
    return b;
}

void kwb_cuda_buffer_free(kwb_cuda_buffer *b) {
    if (!b) return;
    if (ctx_ready && kwb_cuda_ctx_get()) {
        ctx.cu->StreamSynchronize(ctx.stream);   /* nothing queued still writes it (fills and poison are queued) */
        ctx.cu->MemFree(b->base);
    }
    free(b);
}

uint64_t kwb_cuda_buffer_ptr(const kwb_cuda_buffer *b) { return b->ptr; }
uint64_t kwb_cuda_buffer_len(const kwb_cuda_buffer *b) { return b->n; }
int kwb_cuda_buffer_dtype(const kwb_cuda_buffer *b) { return b->dtype; }
size_t kwb_cuda_buffer_bytes(const kwb_cuda_buffer *b) { return b->bytes; }

int kwb_cuda_buffer_upload(kwb_cuda_buffer *b, const void *src, size_t bytes) {
    if (bytes != b->bytes) return kwb_fail(KWB_EINVAL, "%zu bytes given for a device buffer of %zu bytes", bytes, b->bytes);
    kwb_cuda_ctx *c = kwb_cuda_ctx_get();
    if (!c) return KWB_ERUN;
    /* on the harness stream, after what is queued there (a fill, a poison)
     * and before what comes next; a pageable source is staged before this
     * returns, a page-locked one is not written while a copy may read it */
    return kwb_cu_check(c->cu->MemcpyHtoDAsync(b->ptr, src, bytes, c->stream), "cuMemcpyHtoD");
}

int kwb_cuda_buffer_download(const kwb_cuda_buffer *b, void *dst, size_t bytes) {
    if (bytes != b->bytes) return kwb_fail(KWB_EINVAL, "a device buffer of %zu bytes into %zu bytes", b->bytes, bytes);
    kwb_cuda_ctx *c = kwb_cuda_ctx_get();
    if (!c) return KWB_ERUN;
    int rc = kwb_cu_check(c->cu->StreamSynchronize(c->stream), "cuStreamSynchronize");
    return rc ? rc : kwb_cu_check(c->cu->MemcpyDtoH(dst, b->ptr, bytes), "cuMemcpyDtoH");
}

/* ---- page-locked host copies ------------------------------------------- */

struct kwb_cuda_pinned {
    void *p;
    size_t bytes;
};

kwb_cuda_pinned *kwb_cuda_pinned_new(size_t bytes) {
    kwb_cuda_ctx *c = kwb_cuda_ctx_get();
    if (!c) return NULL;
    kwb_cuda_pinned *h = calloc(1, sizeof *h);
    if (!h) { kwb_fail(KWB_ENOMEM, "out of memory"); return NULL; }
    h->bytes = bytes;
    if (kwb_cu_check(c->cu->MemAllocHost(&h->p, bytes ? bytes : 1), "allocating page-locked host memory")) {
        free(h);
        return NULL;
    }
    return h;
}

void kwb_cuda_pinned_free(kwb_cuda_pinned *h) {
    if (!h) return;
    if (ctx_ready && kwb_cuda_ctx_get()) ctx.cu->MemFreeHost(h->p);
    free(h);
}

size_t kwb_cuda_pinned_bytes(const kwb_cuda_pinned *h) { return h->bytes; }

int kwb_cuda_buffer_save(const kwb_cuda_buffer *b, kwb_cuda_pinned *h) {
    if (h->bytes != b->bytes) return kwb_fail(KWB_EINVAL, "a host copy of %zu bytes for a buffer of %zu", h->bytes, b->bytes);
    return kwb_cuda_buffer_download(b, h->p, h->bytes);
}

int kwb_cuda_buffer_load(kwb_cuda_buffer *b, const kwb_cuda_pinned *h) {
    if (h->bytes != b->bytes) return kwb_fail(KWB_EINVAL, "a host copy of %zu bytes for a buffer of %zu", h->bytes, b->bytes);
    return kwb_cuda_buffer_upload(b, h->p, h->bytes);
}

int kwb_cuda_buffer_copy(kwb_cuda_buffer *dst, const kwb_cuda_buffer *src) {
    if (dst->dtype != src->dtype || dst->n != src->n)
        return kwb_fail(KWB_EINVAL, "copy needs equal buffers (%s[%llu] from %s[%llu])",
                        kwb_cuda_dtype_name(dst->dtype), (unsigned long long)dst->n,
                        kwb_cuda_dtype_name(src->dtype), (unsigned long long)src->n);
    kwb_cuda_ctx *c = kwb_cuda_ctx_get();
    if (!c) return KWB_ERUN;
    int rc = kwb_cu_check(c->cu->MemcpyDtoDAsync(dst->ptr, src->ptr, src->bytes, c->stream), "cuMemcpyDtoD");
    return rc ? rc : kwb_cu_check(c->cu->StreamSynchronize(c->stream), "cuStreamSynchronize");
}

int kwb_cuda_buffer_zero(kwb_cuda_buffer *b) {
    kwb_cuda_ctx *c = kwb_cuda_ctx_get();
    if (!c) return KWB_ERUN;
    int rc = kwb_cu_check(c->cu->MemsetD8Async(b->ptr, 0, b->bytes, c->stream), "cuMemsetD8");
    return rc ? rc : kwb_cu_check(c->cu->StreamSynchronize(c->stream), "cuStreamSynchronize");
}

/* ---- launch plans ------------------------------------------------------ */

typedef struct step {
    kwb_cuda_launch l;
    char *params;
    uint32_t *offsets;
    void **argv;           /* launchers: pointers into params */
    int is_gemm;           /* a cublasGemmEx step: g, not l */
    kwb_cuda_gemm g;
} step;

struct kwb_cuda_plan {
    step *steps;
    uint32_t n, cap;
    /* Graph replay: [L2 flush when cold] -> start event -> the steps -> end
     * event, the events recorded by nodes inside the graph, so the time
     * covers the steps alone; built on first use, [0] hot and [1] cold. */
    CUgraphExec exec[2];
    CUevent *ev;           /* event pairs for samples; the graphs use the first */
    uint32_t nev;
    kwb_cuda_buffer **poison;   /* poisoned before every timed run */
    uint32_t npoison;
    cublasHandle_t blas;   /* made at the first gemm step, bound to the harness stream */
    CUdeviceptr blas_ws;   /* its workspace: nothing is allocated while a graph captures */
};

static void plan_drop_graphs(kwb_cuda_plan *p) {
    for (int i = 0; i < 2; i++) {
        if (p->exec[i] && ctx_ready) ctx.cu->GraphExecDestroy(p->exec[i]);
        p->exec[i] = NULL;
    }
}

kwb_cuda_plan *kwb_cuda_plan_new(void) {
    kwb_cuda_plan *p = calloc(1, sizeof *p);
    if (!p) kwb_fail(KWB_ENOMEM, "out of memory");
    return p;
}

void kwb_cuda_plan_free(kwb_cuda_plan *p) {
    if (!p) return;
    for (uint32_t i = 0; i < p->n; i++) {
        free(p->steps[i].params);
        free(p->steps[i].offsets);
        free(p->steps[i].argv);
    }
    if (ctx_ready && kwb_cuda_ctx_get()) {
        plan_drop_graphs(p);
        for (uint32_t i = 0; i < p->nev; i++) ctx.cu->EventDestroy(p->ev[i]);
        if (p->blas || p->blas_ws) ctx.cu->StreamSynchronize(ctx.stream);   /* no queued gemm still uses them */
        if (p->blas) kwb_cublas()->Destroy(p->blas);
        if (p->blas_ws) ctx.cu->MemFree(p->blas_ws);
    }
    free(p->ev);
    free(p->poison);
    free(p->steps);
    free(p);
}

static int plan_grow(kwb_cuda_plan *p);

int kwb_cuda_plan_add(kwb_cuda_plan *p, const kwb_cuda_launch *l) {
    if (!l->fn) return kwb_fail(KWB_EINVAL, "a launch needs a kernel");
    for (int i = 0; i < 3; i++)
        if (!l->fn->launcher && (l->grid[i] == 0 || l->block[i] == 0))
            return kwb_fail(KWB_EINVAL, "grid and block dimensions must be >= 1 (got grid %u,%u,%u block %u,%u,%u)",
                            l->grid[0], l->grid[1], l->grid[2], l->block[0], l->block[1], l->block[2]);
    int grown = plan_grow(p);
    if (grown) return grown;
    step *s = &p->steps[p->n];
    memset(s, 0, sizeof *s);
    s->l = *l;
    s->params = malloc(l->params_len ? l->params_len : 1);
    s->offsets = malloc(sizeof *s->offsets * (l->nargs ? l->nargs : 1));
    s->argv = malloc(sizeof *s->argv * (l->nargs ? l->nargs : 1));
    if (!s->params || !s->offsets || !s->argv) {
        free(s->params); free(s->offsets); free(s->argv);
        return kwb_fail(KWB_ENOMEM, "out of memory");
    }
    if (l->params_len) memcpy(s->params, l->params, l->params_len);
    for (uint32_t i = 0; i < l->nargs; i++) {
        s->offsets[i] = l->offsets ? l->offsets[i] : 0;
        s->argv[i] = s->params + s->offsets[i];
    }
    s->l.params = s->params;
    s->l.offsets = s->offsets;
    p->n++;
    plan_drop_graphs(p);
    return 0;
}

/* ---- gemm steps (cuBLAS) ----------------------------------------------- */

/* cuBLAS's names for its statuses (cublas_api.h), for messages. */
static const char *blas_status(int st) {
    switch (st) {
    case 1: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case 3: return "CUBLAS_STATUS_ALLOC_FAILED";
    case 7: return "CUBLAS_STATUS_INVALID_VALUE";
    case 8: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case 11: return "CUBLAS_STATUS_MAPPING_ERROR";
    case 13: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case 14: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case 15: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case 16: return "CUBLAS_STATUS_LICENSE_ERROR";
    default: return "an unknown cuBLAS status";
    }
}

/* cudaDataType_t of a kwb dtype: CUDA_R_32F 0, CUDA_R_16F 2, CUDA_R_16BF 14; -1 otherwise. */
static int blas_type(int dtype) {
    if (dtype == KWB_F32) return 0;
    if (dtype == KWB_F16) return 2;
    if (dtype == KWB_BF16) return 14;
    return -1;
}

/* The elements a column-major operand of rows x cols (as stored) with leading
 * dimension ld spans from its first: ld * (cols - 1) + rows. */
static uint64_t span(int64_t rows, int64_t cols, int64_t ld) { return (uint64_t)(ld * (cols - 1) + rows); }

int kwb_cuda_gemm_check(const kwb_cuda_gemm *g, const int dtype[3], const uint64_t len[3]) {
    if (g->m < 1 || g->n < 1 || g->k < 1)
        return kwb_fail(KWB_EINVAL, "gemm dimensions must be >= 1 (got m %d, n %d, k %d)", g->m, g->n, g->k);
    if ((g->trans_a != 0 && g->trans_a != 1) || (g->trans_b != 0 && g->trans_b != 1))
        return kwb_fail(KWB_EINVAL, "gemm trans_a and trans_b are 0 (as stored) or 1 (transposed)");
    if (blas_type(dtype[0]) < 0 || dtype[0] != dtype[1])
        return kwb_fail(KWB_EINVAL, "gemm A and B must both be bf16, f16 or f32 (got %s and %s)",
                        kwb_cuda_dtype_name(dtype[0]), kwb_cuda_dtype_name(dtype[1]));
    if (dtype[2] != dtype[0] && dtype[2] != KWB_F32)
        return kwb_fail(KWB_EINVAL, "gemm C must be %s or f32 (got %s)", kwb_cuda_dtype_name(dtype[0]),
                        kwb_cuda_dtype_name(dtype[2]));
    /* as stored: A is m x k (k x m transposed), B k x n (n x k), C m x n */
    const char *names[3] = {"A", "B", "C"};
    int64_t rows[3] = {g->trans_a ? g->k : g->m, g->trans_b ? g->n : g->k, g->m};
    int64_t cols[3] = {g->trans_a ? g->m : g->k, g->trans_b ? g->k : g->n, g->n};
    int64_t ld[3] = {g->lda, g->ldb, g->ldc};
    uint64_t off[3] = {g->a_offset, g->b_offset, g->c_offset};
    for (int i = 0; i < 3; i++) {
        if (ld[i] < rows[i])
            return kwb_fail(KWB_EINVAL, "gemm %s: its leading dimension %lld is under its %lld rows as stored",
                            names[i], (long long)ld[i], (long long)rows[i]);
        uint64_t need = span(rows[i], cols[i], ld[i]);
        if (off[i] > len[i] || need > len[i] - off[i])
            return kwb_fail(KWB_EINVAL, "gemm %s: %llu elements from offset %llu pass the end of its buffer of %llu",
                            names[i], (unsigned long long)need, (unsigned long long)off[i],
                            (unsigned long long)len[i]);
    }
    return 0;
}

/* The plan's cuBLAS handle, made once: bound to the harness stream, then
 * given a workspace of its own (cublasSetStream resets the workspace, so
 * that comes second), so that a gemm captured into a graph allocates
 * nothing. */
#define BLAS_WORKSPACE (32u << 20)   /* cuBLAS's advice for Hopper */

static int plan_blas(kwb_cuda_plan *p, kwb_cuda_ctx *c) {
    if (p->blas) return 0;
    const kwb_cublas_api *cb = kwb_cublas();
    if (!cb) return KWB_ERUN;
    if (!cb->SetWorkspace) return kwb_fail(KWB_ERUN, "no cuBLAS gemm steps: libcublas lacks cublasSetWorkspace_v2");
    if (!p->blas_ws) {
        int rc = kwb_cu_check(c->cu->MemAlloc(&p->blas_ws, BLAS_WORKSPACE), "allocating the cuBLAS workspace");
        if (rc) { p->blas_ws = 0; return rc; }
    }
    cublasHandle_t h = NULL;
    int st = cb->Create(&h);
    if (st != 0) return kwb_fail(KWB_ERUN, "cublasCreate failed: %s (%d)", blas_status(st), st);
    st = cb->SetStream(h, c->stream);
    if (st == 0) st = cb->SetWorkspace(h, (void *)(uintptr_t)p->blas_ws, BLAS_WORKSPACE);
    if (st != 0) {
        cb->Destroy(h);
        return kwb_fail(KWB_ERUN, "binding cuBLAS to the harness stream failed: %s (%d)", blas_status(st), st);
    }
    p->blas = h;
    return 0;
}

static int plan_grow(kwb_cuda_plan *p) {
    if (p->n < p->cap) return 0;
    uint32_t cap = p->cap ? p->cap * 2 : 4;
    step *ns = realloc(p->steps, sizeof *ns * cap);
    if (!ns) return kwb_fail(KWB_ENOMEM, "out of memory");
    p->steps = ns;
    p->cap = cap;
    return 0;
}

int kwb_cuda_plan_add_gemm(kwb_cuda_plan *p, const kwb_cuda_gemm *g) {
    if (!g->a || !g->b || !g->c) return kwb_fail(KWB_EINVAL, "a gemm step needs buffers a, b and c");
    int dtype[3] = {kwb_cuda_buffer_dtype(g->a), kwb_cuda_buffer_dtype(g->b), kwb_cuda_buffer_dtype(g->c)};
    uint64_t len[3] = {kwb_cuda_buffer_len(g->a), kwb_cuda_buffer_len(g->b), kwb_cuda_buffer_len(g->c)};
    int rc = kwb_cuda_gemm_check(g, dtype, len);
    if (rc) return rc;
    kwb_cuda_ctx *c = kwb_cuda_ctx_get();
    if (!c) return KWB_ERUN;
    if ((rc = plan_blas(p, c)) || (rc = plan_grow(p))) return rc;
    step *s = &p->steps[p->n];
    memset(s, 0, sizeof *s);
    s->is_gemm = 1;
    s->g = *g;
    p->n++;
    plan_drop_graphs(p);
    return 0;
}

/* One gemm step on the harness stream (the plan's handle is bound to it). */
static int gemm_enqueue(kwb_cuda_plan *p, const step *s, uint32_t i) {
    const kwb_cublas_api *cb = kwb_cublas();
    if (!cb || !p->blas) return kwb_fail(KWB_ERUN, "step %u: the plan has no cuBLAS handle", i + 1);
    const kwb_cuda_gemm *g = &s->g;
    int ta = blas_type(kwb_cuda_buffer_dtype(g->a)), tc = blas_type(kwb_cuda_buffer_dtype(g->c));
    size_t ea = kwb_cuda_buffer_bytes(g->a) / kwb_cuda_buffer_len(g->a);
    size_t ec = kwb_cuda_buffer_bytes(g->c) / kwb_cuda_buffer_len(g->c);
    void *a = (void *)(uintptr_t)(kwb_cuda_buffer_ptr(g->a) + g->a_offset * ea);
    void *b = (void *)(uintptr_t)(kwb_cuda_buffer_ptr(g->b) + g->b_offset * ea);
    void *cc = (void *)(uintptr_t)(kwb_cuda_buffer_ptr(g->c) + g->c_offset * ec);
    /* CUBLAS_OP_N 0, CUBLAS_OP_T 1; CUBLAS_COMPUTE_32F 68; CUBLAS_GEMM_DEFAULT -1; alpha and
     * beta host floats (the default pointer mode), read when the call is made */
    int st = cb->GemmEx(p->blas, g->trans_a, g->trans_b, g->m, g->n, g->k, &g->alpha, a, ta, g->lda, b, ta, g->ldb,
                        &g->beta, cc, tc, g->ldc, 68, -1);
    if (st != 0)
        return kwb_fail(KWB_ERUN, "step %u: cublasGemmEx (m %d, n %d, k %d) failed: %s (%d)", i + 1, g->m, g->n, g->k,
                        blas_status(st), st);
    return 0;
}

/* Enqueue every step on the harness stream. */
static int plan_enqueue(kwb_cuda_plan *p, kwb_cuda_ctx *c) {
    for (uint32_t i = 0; i < p->n; i++) {
        step *s = &p->steps[i];
        if (s->is_gemm) {
            int rc = gemm_enqueue(p, s, i);
            if (rc) return rc;
            continue;
        }
        kwb_cuda_launch *l = &s->l;
        char what[160];
        if (l->fn->launcher) {
            int r = l->fn->launcher(s->argv, c->stream);
            if (r != 0) return kwb_fail(KWB_ERUN, "step %u: the host launcher returned CUDA error %d", i + 1, r);
            continue;
        }
        if (l->smem > 48 * 1024 && l->fn->smem_set < l->smem) {
            snprintf(what, sizeof what, "step %u: raising the dynamic shared memory limit to %u bytes", i + 1, l->smem);
            int rc = kwb_cu_check(c->cu->FuncSetAttribute(l->fn->f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                                          (int)l->smem), what);
            if (rc) return rc;
            l->fn->smem_set = l->smem;
        }
        size_t len = l->params_len;
        void *extra[] = {(void *)1, s->params, (void *)2, &len, (void *)0};  /* BUFFER_POINTER, BUFFER_SIZE, END */
        CUresult r;
        if (l->cluster[0] || l->cluster[1] || l->cluster[2]) {
            if (!c->cu->LaunchKernelEx)
                return kwb_fail(KWB_ERUN, "step %u: clusters need cuLaunchKernelEx (CUDA 12 driver)", i + 1);
            CUlaunchAttribute attr;
            memset(&attr, 0, sizeof attr);
            attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
            attr.value.clusterDim.x = l->cluster[0] ? l->cluster[0] : 1;
            attr.value.clusterDim.y = l->cluster[1] ? l->cluster[1] : 1;
            attr.value.clusterDim.z = l->cluster[2] ? l->cluster[2] : 1;
            CUlaunchConfig cfg = {l->grid[0], l->grid[1], l->grid[2], l->block[0], l->block[1], l->block[2],
                                  l->smem, c->stream, &attr, 1};
            r = c->cu->LaunchKernelEx(&cfg, l->fn->f, NULL, len ? extra : NULL);
        } else {
            r = c->cu->LaunchKernel(l->fn->f, l->grid[0], l->grid[1], l->grid[2], l->block[0], l->block[1],
                                    l->block[2], l->smem, c->stream, NULL, len ? extra : NULL);
        }
        snprintf(what, sizeof what, "step %u: launch of grid %u,%u,%u block %u,%u,%u smem %u", i + 1,
                 l->grid[0], l->grid[1], l->grid[2], l->block[0], l->block[1], l->block[2], l->smem);
        int rc = kwb_cu_check(r, what);
        if (rc) return rc;
    }
    return 0;
}

int kwb_cuda_plan_run(kwb_cuda_plan *p) {
    kwb_cuda_ctx *c = kwb_cuda_ctx_get();
    if (!c) return KWB_ERUN;
    int rc = plan_enqueue(p, c);
    if (rc) return rc;
    return kwb_cu_check(c->cu->StreamSynchronize(c->stream), "running the plan");
}

/* ---- NVML -------------------------------------------------------------- */

static nvmlDevice_t nvml_device(const kwb_nvml_api *nv) {
    static nvmlDevice_t dev;
    static int tried;
    if (!tried) {
        tried = 1;
        if (nv->DeviceGetHandleByPciBusId(ctx.info.pci_bus_id, &dev) != 0) dev = NULL;
    }
    return dev;
}

int kwb_cuda_clocks_read(int32_t *sm_mhz, int32_t *temp, uint64_t *reasons) {
    if (!kwb_cuda_ctx_get()) return KWB_ERUN;
    const kwb_nvml_api *nv = kwb_nvml();
    if (!nv) return KWB_ERUN;
    nvmlDevice_t d = nvml_device(nv);
    if (!d) return kwb_fail(KWB_ERUN, "NVML does not know the device at %s", ctx.info.pci_bus_id);
    unsigned mhz = 0, t = 0;
    unsigned long long r = 0;
    nv->DeviceGetClockInfo(d, 1 /* NVML_CLOCK_SM */, &mhz);
    nv->DeviceGetTemperature(d, 0 /* NVML_TEMPERATURE_GPU */, &t);
    if (nv->DeviceGetThrottleReasons) nv->DeviceGetThrottleReasons(d, &r);
    *sm_mhz = (int32_t)mhz;
    *temp = (int32_t)t;
    if (reasons) *reasons = r;
    return 0;
}

/* Reasons that mean a slowdown: software power cap, hardware slowdown,
 * software and hardware thermal, power brake. */
#define SLOWDOWN_REASONS 0xecull

/* ---- timing ------------------------------------------------------------ */

typedef struct {
    kwb_cuda_plan *p;
    kwb_cuda_ctx *c;
    CUdeviceptr flush;
    unsigned long long flush_n;   /* 8-byte words */
    CUfunction flush_fn;
    unsigned flush_grid;
    int graph;
} time_ctx;

#define EVENT_PAIRS 64

/* Before each timed run: poison the plan's outputs (and scratch), then
 * (cold) write the flush buffer, so nothing kept in it lasts from one run to
 * the next, and read it, which leaves L2 full of clean lines and writes the
 * dirty ones back before the timed region. */
static int enqueue_flush(time_ctx *t) {
    for (uint32_t i = 0; i < t->p->npoison; i++) {
        int rc = kwb_cuda_buffer_poison_enqueue(t->p->poison[i]);
        if (rc) return rc;
    }
    if (!t->flush) return 0;
    int rc = kwb_cu_check(t->c->cu->MemsetD32Async(t->flush, 0x5a5a5a5au, t->flush_n * 2, t->c->stream),
                          "writing the L2 flush buffer");
    if (rc) return rc;
    void *args[] = {&t->flush, &t->flush_n, &t->flush};
    return kwb_cu_check(t->c->cu->LaunchKernel(t->flush_fn, t->flush_grid, 1, 1, 512, 1, 1, 0, t->c->stream, args, NULL),
                        "reading the L2 flush buffer");
}

/* Graph replay: one launch and one wait a sample, since the graph's own
 * events are overwritten by its next replay. */
static int sample_graph(time_ctx *t, uint32_t batch, double *seconds) {
    kwb_cuda_ctx *c = t->c;
    CUgraphExec exec = t->p->exec[t->flush ? 1 : 0];
    double total = 0;
    for (uint32_t j = 0; j < batch; j++) {
        float ms = 0;
        int rc = kwb_cu_check(c->cu->GraphLaunch(exec, c->stream), "cuGraphLaunch");
        if (!rc) rc = kwb_cu_check(c->cu->StreamSynchronize(c->stream), "running the plan");
        if (!rc) rc = kwb_cu_check(c->cu->EventElapsedTime(&ms, t->p->ev[0], t->p->ev[1]), "cuEventElapsedTime");
        if (rc) return rc;
        total += ms * 1e-3;
    }
    *seconds = total;
    return 0;
}

static int sample(void *vctx, uint32_t batch, double *seconds) {
    time_ctx *t = vctx;
    kwb_cuda_ctx *c = t->c;
    if (t->graph) return sample_graph(t, batch, seconds);
    double total = 0;
    uint32_t done = 0;
    while (done < batch) {
        uint32_t k = batch - done < EVENT_PAIRS ? batch - done : EVENT_PAIRS;
        for (uint32_t j = 0; j < k; j++) {
            int rc = enqueue_flush(t);
            if (!rc) rc = kwb_cu_check(c->cu->EventRecord(t->p->ev[2 * j], c->stream), "cuEventRecord");
            if (!rc) rc = plan_enqueue(t->p, c);
            if (!rc) rc = kwb_cu_check(c->cu->EventRecord(t->p->ev[2 * j + 1], c->stream), "cuEventRecord");
            if (rc) return rc;
        }
        int rc = kwb_cu_check(c->cu->StreamSynchronize(c->stream), "running the plan");
        if (rc) return rc;
        for (uint32_t j = 0; j < k; j++) {
            float ms = 0;
            rc = kwb_cu_check(c->cu->EventElapsedTime(&ms, t->p->ev[2 * j], t->p->ev[2 * j + 1]), "cuEventElapsedTime");
            if (rc) return rc;
            total += ms * 1e-3;
        }
        done += k;
    }
    *seconds = total;
    return 0;
}

/* Capture [flush] -> start event -> steps -> end event into a graph. */
static int build_graph(kwb_cuda_plan *p, time_ctx *t, CUgraphExec *out) {
    kwb_cuda_ctx *c = t->c;
    if (!c->cu->EventRecordWithFlags)
        return kwb_fail(KWB_ERUN, "graph timing needs cuEventRecordWithFlags (a CUDA 11.1 driver or newer)");
    CUgraph g = NULL;
    int rc = kwb_cu_check(c->cu->StreamBeginCapture(c->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "cuStreamBeginCapture");
    if (rc) return rc;
    int erc = enqueue_flush(t);
    if (!erc) erc = kwb_cu_check(c->cu->EventRecordWithFlags(p->ev[0], c->stream, CU_EVENT_RECORD_EXTERNAL), "recording the start event in the graph");
    if (!erc) erc = plan_enqueue(p, c);
    if (!erc) erc = kwb_cu_check(c->cu->EventRecordWithFlags(p->ev[1], c->stream, CU_EVENT_RECORD_EXTERNAL), "recording the end event in the graph");
    rc = kwb_cu_check(c->cu->StreamEndCapture(c->stream, &g), "capturing the plan into a graph");
    if (erc || rc) { if (g) c->cu->GraphDestroy(g); return erc ? erc : rc; }
    rc = kwb_cu_check(c->cu->GraphInstantiate(out, g, 0), "cuGraphInstantiate");
    c->cu->GraphDestroy(g);
    if (rc) *out = NULL;
    return rc;
}

static CUdeviceptr flush_buf;
static size_t flush_bytes;

int kwb_cuda_plan_poison_before(kwb_cuda_plan *p, kwb_cuda_buffer *const *bufs, uint32_t n) {
    kwb_cuda_buffer **copy = n ? calloc(n, sizeof *copy) : NULL;
    if (n && !copy) return kwb_fail(KWB_ENOMEM, "out of memory");
    for (uint32_t i = 0; i < n; i++) copy[i] = bufs[i];
    free(p->poison);
    p->poison = copy;
    p->npoison = n;
    plan_drop_graphs(p);   /* the graphs hold the old list */
    return 0;
}

/* The events, the flush buffer (cold) and the graph (graph) of timed runs. */
static int time_setup(kwb_cuda_plan *p, kwb_cuda_ctx *c, int cold, int graph, time_ctx *tp) {
    if (p->n == 0) return kwb_fail(KWB_EINVAL, "the plan has no launches");
    int rc;
    if (!p->ev) {
        p->ev = calloc(2 * EVENT_PAIRS, sizeof *p->ev);
        if (!p->ev) return kwb_fail(KWB_ENOMEM, "out of memory");
        for (; p->nev < 2 * EVENT_PAIRS; p->nev++)
            if ((rc = kwb_cu_check(c->cu->EventCreate(&p->ev[p->nev], 0), "cuEventCreate"))) return rc;
    }
    time_ctx t = {.p = p, .c = c, .graph = graph};
    if (cold) {
        size_t want = 2 * (size_t)(c->info.l2_bytes > 0 ? c->info.l2_bytes : 64 << 20);
        if (flush_bytes < want) {
            if (flush_buf) c->cu->MemFree(flush_buf);
            flush_buf = 0;
            flush_bytes = 0;
            if ((rc = kwb_cu_check(c->cu->MemAlloc(&flush_buf, want), "allocating the L2 flush buffer"))) return rc;
            if ((rc = kwb_cu_check(c->cu->MemsetD32Async(flush_buf, 0x5a5a5a5au, want / 4, c->stream), "filling the L2 flush buffer"))) return rc;
            flush_bytes = want;
        }
        t.flush_fn = kwb_cuda_builtin("kwb_flush_read");
        if (!t.flush_fn) return KWB_ERUN;
        t.flush = flush_buf;
        t.flush_n = flush_bytes / 8;
        t.flush_grid = (unsigned)(c->info.sms > 0 ? c->info.sms : 80) * 4;
    }
    if (graph && !p->exec[cold ? 1 : 0] && (rc = build_graph(p, &t, &p->exec[cold ? 1 : 0]))) return rc;
    *tp = t;
    return 0;
}

int kwb_cuda_plan_replay(kwb_cuda_plan *p, int cold, double *seconds) {
    kwb_cuda_ctx *c = kwb_cuda_ctx_get();
    if (!c) return KWB_ERUN;
    time_ctx t;
    int rc = time_setup(p, c, cold, 1, &t);
    return rc ? rc : sample_graph(&t, 1, seconds);
}

int kwb_cuda_plan_time(kwb_cuda_plan *p, const kwb_time_opts *o, int cold, int graph,
                       kwb_stats *st, kwb_cuda_clocks *clk) {
    kwb_cuda_ctx *c = kwb_cuda_ctx_get();
    if (!c) return KWB_ERUN;
    if (p->n == 0) return kwb_fail(KWB_EINVAL, "the plan has no launches");
    /* one correctness run first: a failing plan fails here with its step */
    int rc = kwb_cuda_plan_run(p);
    time_ctx t;
    if (rc || (rc = time_setup(p, c, cold, graph, &t))) return rc;
    kwb_cuda_clocks k = {0};
    if (kwb_cuda_clocks_read(&k.sm_mhz_before, &k.temp_before, NULL) == 0) k.valid = 1;
    rc = kwb_time_loop(sample, &t, o, st);
    if (rc) return rc;
    if (k.valid && kwb_cuda_clocks_read(&k.sm_mhz_after, &k.temp_after, &k.reasons_after) == 0) {
        const kwb_nvml_api *nv = kwb_nvml();
        unsigned mx = 0;
        if (nv && nvml_device(nv)) nv->DeviceGetMaxClockInfo(nvml_device(nv), 1, &mx);
        k.sm_mhz_max = (int32_t)mx;
        k.throttled = (k.reasons_after & SLOWDOWN_REASONS) != 0;
    } else k.valid = 0;
    if (clk) *clk = k;
    return 0;
}

/* ---- tensor maps ------------------------------------------------------- */

int kwb_cuda_tensor_map_encode(void *map, int dtype, uint32_t rank, uint64_t address, const uint64_t *dims,
                               const uint64_t *strides, const uint32_t *box, const uint32_t *estrides,
                               int interleave, int swizzle, int l2, int oob) {
    kwb_cuda_ctx *c = kwb_cuda_ctx_get();
    if (!c) return KWB_ERUN;
    if (!c->cu->TensorMapEncodeTiled)
        return kwb_fail(KWB_ERUN, "tensor maps need cuTensorMapEncodeTiled (a CUDA 12 driver or newer)");
    if ((uintptr_t)map % 64) return kwb_fail(KWB_EINVAL, "a tensor map must be 64-byte aligned");
    return kwb_cu_check(c->cu->TensorMapEncodeTiled(map, dtype, rank, (void *)(uintptr_t)address, dims, strides, box,
                                                    estrides, interleave, swizzle, l2, oob),
                        "cuTensorMapEncodeTiled");
}

/* ---- ceilings ---------------------------------------------------------- */

static int time_events(kwb_cuda_ctx *c, CUevent a, CUevent b, double *seconds) {
    int rc = kwb_cu_check(c->cu->EventRecord(b, c->stream), "cuEventRecord");
    if (!rc) rc = kwb_cu_check(c->cu->StreamSynchronize(c->stream), "cuStreamSynchronize");
    float ms = 0;
    if (!rc) rc = kwb_cu_check(c->cu->EventElapsedTime(&ms, a, b), "cuEventElapsedTime");
    *seconds = ms * 1e-3;
    return rc;
}

int kwb_cuda_measure_copy(uint64_t bytes, uint32_t reps, double *seconds) {
    kwb_cuda_ctx *c = kwb_cuda_ctx_get();
    if (!c) return KWB_ERUN;
    CUdeviceptr a = 0, b = 0;
    CUevent e0 = NULL, e1 = NULL;
    int rc = kwb_cu_check(c->cu->MemAlloc(&a, bytes), "allocating the copy source");
    if (!rc) rc = kwb_cu_check(c->cu->MemAlloc(&b, bytes), "allocating the copy destination");
    if (!rc) rc = kwb_cu_check(c->cu->MemsetD32Async(a, 0x3f800000u, bytes / 4, c->stream), "cuMemsetD32");
    if (!rc) rc = kwb_cu_check(c->cu->EventCreate(&e0, 0), "cuEventCreate");
    if (!rc) rc = kwb_cu_check(c->cu->EventCreate(&e1, 0), "cuEventCreate");
    double best = INFINITY;
    for (uint32_t r = 0; !rc && r < reps + 2; r++) {   /* two warm-ups; the fastest of the rest */
        rc = kwb_cu_check(c->cu->EventRecord(e0, c->stream), "cuEventRecord");
        if (!rc) rc = kwb_cu_check(c->cu->MemcpyDtoDAsync(b, a, bytes, c->stream), "cuMemcpyDtoD");
        double s = 0;
        if (!rc) rc = time_events(c, e0, e1, &s);
        if (!rc && r >= 2 && s < best) best = s;
    }
    if (e0) c->cu->EventDestroy(e0);
    if (e1) c->cu->EventDestroy(e1);
    if (a) c->cu->MemFree(a);
    if (b) c->cu->MemFree(b);
    *seconds = best;
    return rc;
}

int kwb_cuda_time_launch(CUfunction f, unsigned grid, unsigned block, void **args, uint32_t reps, double *seconds) {
    kwb_cuda_ctx *c = kwb_cuda_ctx_get();
    if (!c) return KWB_ERUN;
    CUevent e0 = NULL, e1 = NULL;
    int rc = kwb_cu_check(c->cu->EventCreate(&e0, 0), "cuEventCreate");
    if (!rc) rc = kwb_cu_check(c->cu->EventCreate(&e1, 0), "cuEventCreate");
    double best = INFINITY;
    for (uint32_t r = 0; !rc && r < reps + 2; r++) {
        rc = kwb_cu_check(c->cu->EventRecord(e0, c->stream), "cuEventRecord");
        if (!rc) rc = kwb_cu_check(c->cu->LaunchKernel(f, grid, 1, 1, block, 1, 1, 0, c->stream, args, NULL), "launch");
        double s = 0;
        if (!rc) rc = time_events(c, e0, e1, &s);
        if (!rc && r >= 2 && s < best) best = s;
    }
    if (e0) c->cu->EventDestroy(e0);
    if (e1) c->cu->EventDestroy(e1);
    *seconds = best;
    return rc;
}
