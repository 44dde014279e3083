/* cuda_int.h: what the CUDA backend's files share: the module and function
 * objects, the context, and the built-in kernels */
#ifndef KWB_CUDA_INT_H
#define KWB_CUDA_INT_H
#include "cuda_api.h"
#include "kwb.h"

struct kwb_cuda_module {
    int kind;                   /* kwb_cuda_kind */
    char hash[65];
    char arch[32];
    char *image;                /* cubin (NVRTC) */
    size_t image_len;
    char *ptx, *log, *path;
    int cached;
    kwb_cuda_kernel_info *kernels;
    uint32_t nkernels;
    void *so;                   /* dlopen handle (nvcc) */
    CUmodule cu;                /* loaded on first kwb_cuda_fn_get */
};

/* The harness's context: device 0's primary context made current on the
 * calling thread, and its stream. */
typedef struct kwb_cuda_ctx {
    const kwb_cu_api *cu;
    CUdevice dev;
    CUcontext ctx;
    CUstream stream;
    kwb_cuda_device_info info;
} kwb_cuda_ctx;

kwb_cuda_ctx *kwb_cuda_ctx_get(void);   /* NULL with the reason recorded */
/* Record "what failed: CUDA_ERROR_X (text)" and return KWB_ERUN unless r is 0. */
int kwb_cu_check(CUresult r, const char *what);
void kwb_cuda_module_unload(kwb_cuda_module *m);

/* The built-in kernels (cuda_builtin.c), compiled with NVRTC on first use. */
CUfunction kwb_cuda_builtin(const char *name);
/* Their sources: core/cuda/kwb_builtin.cu and kwb_wmma.cu (which needs the
 * CUDA headers, mma.h), each file's bytes as a C string (build/cuda_sources.c). */
extern const char kwb_cuda_builtin_source[];
extern const char kwb_cuda_wmma_source[];
/* Where the built-in kernels' cubins are kept (<cache dir>/build/cuda). */
void kwb_cuda_set_build_dir(const char *dir);
const char *kwb_cuda_nvcc_path(char *buf, size_t len);
/* The best of reps timed launches of f on the harness's stream (cuda_run.c),
 * for the ceilings the built-in kernels measure. */
int kwb_cuda_time_launch(CUfunction f, unsigned grid, unsigned block, void **args, uint32_t reps, double *seconds);

/* A buffer's guard bands (cuda_run.c): nb bytes before its first byte and
 * na after its last, and the seed of their bytes; filled or checked by
 * kwb_cuda_guard (cuda_builtin.c). */
void kwb_cuda_buffer_zones(const kwb_cuda_buffer *b, CUdeviceptr *before, unsigned long long *nb, CUdeviceptr *after,
                           unsigned long long *na, unsigned long long *pattern);
int kwb_cuda_guard(kwb_cuda_buffer *b, int fill, int *hit, int64_t *first, int64_t *last);

#endif
