/* cuda_load.c: loading the CUDA driver, NVRTC, NVML and cuBLAS with dlopen on
 * first use, so kwb links nothing of CUDA and runs (compile-only, or not at
 * all for CUDA) on machines without it. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_api.h"
#include "error.h"
#include "kwb.h"

const char *kwb_cuda_home(void) {
    const char *h = getenv("CUDA_HOME");
    return h && *h ? h : "/usr/local/cuda";
}

/* dlsym the first of the NUL-separated names that exists. */
static void *sym(void *h, const char *names) {
    for (const char *n = names; *n; n += strlen(n) + 1) {
        void *p = dlsym(h, n);
        if (p) return p;
    }
    return NULL;
}

#define LOAD(tab, field, names, required)                                           \
    do {                                                                           \
        *(void **)&(tab)->field = sym(h, names "\0");                               \
        if (!(tab)->field && (required)) { missing = names; goto fail; }            \
    } while (0)

/* ---- driver ------------------------------------------------------------ */

static pthread_once_t cu_once = PTHREAD_ONCE_INIT;
static kwb_cu_api cu_tab;
static int cu_ok;
static char cu_err[512];
static int cu_status = KWB_ENODRIVER;   /* of the failure cu_err names */

static void cu_load(void) {
    const char *missing = NULL;
    /* the loader path only: the toolkit's stubs/libcuda.so is no driver;
     * KWB_CUDA_DRIVER names another library (or a missing one, to run as if
     * there were no GPU) */
    const char *pick = getenv("KWB_CUDA_DRIVER");
    void *h = dlopen(pick && *pick ? pick : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        if (pick && *pick) snprintf(cu_err, sizeof cu_err, "no CUDA driver: KWB_CUDA_DRIVER names %.400s, which cannot be loaded", pick);
        else snprintf(cu_err, sizeof cu_err, "no CUDA driver: libcuda.so.1 not found");
        return;
    }
    kwb_cu_api *t = &cu_tab;
    LOAD(t, Init, "cuInit", 1);
    LOAD(t, DriverGetVersion, "cuDriverGetVersion", 1);
    LOAD(t, GetErrorString, "cuGetErrorString", 1);
    LOAD(t, GetErrorName, "cuGetErrorName", 1);
    LOAD(t, DeviceGetCount, "cuDeviceGetCount", 1);
    LOAD(t, DeviceGet, "cuDeviceGet", 1);
    LOAD(t, DeviceGetName, "cuDeviceGetName", 1);
    LOAD(t, DeviceGetAttribute, "cuDeviceGetAttribute", 1);
    LOAD(t, DeviceTotalMem, "cuDeviceTotalMem_v2", 1);
    LOAD(t, DeviceGetPCIBusId, "cuDeviceGetPCIBusId", 1);
    LOAD(t, DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", 1);
    LOAD(t, CtxSetCurrent, "cuCtxSetCurrent", 1);
    LOAD(t, CtxSynchronize, "cuCtxSynchronize", 1);
    LOAD(t, MemGetInfo, "cuMemGetInfo_v2", 1);
    LOAD(t, MemAlloc, "cuMemAlloc_v2", 1);
    LOAD(t, MemFree, "cuMemFree_v2", 1);
    LOAD(t, MemAllocHost, "cuMemAllocHost_v2", 1);
    LOAD(t, MemFreeHost, "cuMemFreeHost", 1);
    LOAD(t, MemcpyHtoD, "cuMemcpyHtoD_v2", 1);
    LOAD(t, MemcpyDtoH, "cuMemcpyDtoH_v2", 1);
    LOAD(t, MemcpyDtoD, "cuMemcpyDtoD_v2", 1);
    LOAD(t, MemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2", 1);
    LOAD(t, MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", 1);
    LOAD(t, MemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", 1);
    LOAD(t, MemsetD8Async, "cuMemsetD8Async", 1);
    LOAD(t, MemsetD16Async, "cuMemsetD16Async", 1);
    LOAD(t, MemsetD32Async, "cuMemsetD32Async", 1);
    LOAD(t, ModuleLoadData, "cuModuleLoadData", 1);
    LOAD(t, ModuleUnload, "cuModuleUnload", 1);
    LOAD(t, ModuleGetFunction, "cuModuleGetFunction", 1);
    LOAD(t, FuncGetAttribute, "cuFuncGetAttribute", 1);
    LOAD(t, FuncSetAttribute, "cuFuncSetAttribute", 1);
    LOAD(t, FuncGetParamInfo, "cuFuncGetParamInfo", 0);
    LOAD(t, LaunchKernel, "cuLaunchKernel", 1);
    LOAD(t, LaunchKernelEx, "cuLaunchKernelEx", 0);
    LOAD(t, TensorMapEncodeTiled, "cuTensorMapEncodeTiled", 0);
    LOAD(t, StreamCreate, "cuStreamCreate", 1);
    LOAD(t, StreamSynchronize, "cuStreamSynchronize", 1);
    LOAD(t, EventCreate, "cuEventCreate", 1);
    LOAD(t, EventDestroy, "cuEventDestroy_v2", 1);
    LOAD(t, EventRecord, "cuEventRecord", 1);
    LOAD(t, EventRecordWithFlags, "cuEventRecordWithFlags", 0);
    LOAD(t, EventElapsedTime, "cuEventElapsedTime_v2\0cuEventElapsedTime", 1);
    LOAD(t, StreamBeginCapture, "cuStreamBeginCapture_v2", 1);
    LOAD(t, StreamEndCapture, "cuStreamEndCapture", 1);
    LOAD(t, GraphInstantiate, "cuGraphInstantiateWithFlags", 1);
    LOAD(t, GraphLaunch, "cuGraphLaunch", 1);
    LOAD(t, GraphExecDestroy, "cuGraphExecDestroy", 1);
    LOAD(t, GraphDestroy, "cuGraphDestroy", 1);
    CUresult r = t->Init(0);
    if (r == CUDA_ERROR_STUB_LIBRARY) {
        snprintf(cu_err, sizeof cu_err, "no CUDA driver: libcuda.so.1 is the toolkit's stub library");
        return;
    }
    if (r == CUDA_ERROR_NO_DEVICE) {
        snprintf(cu_err, sizeof cu_err, "no CUDA device: the driver sees no GPU");
        cu_status = KWB_ENODEVICE;
        return;
    }
    if (r != CUDA_SUCCESS) {
        char b[160];
        snprintf(cu_err, sizeof cu_err, "the CUDA driver failed to start: %s", kwb_cu_errstr(r, b, sizeof b));
        cu_status = KWB_ERUN;
        return;
    }
    cu_ok = 1;
    return;
fail:
    snprintf(cu_err, sizeof cu_err, "no CUDA driver: libcuda.so.1 lacks %s (driver too old)", missing);
}

const kwb_cu_api *kwb_cu(void) {
    pthread_once(&cu_once, cu_load);
    if (!cu_ok) { kwb_fail(cu_status, "%s", cu_err); return NULL; }
    return &cu_tab;
}

const char *kwb_cu_errstr(CUresult r, char *buf, size_t len) {
    const char *name = NULL, *s = NULL;
    if (cu_tab.GetErrorName) cu_tab.GetErrorName(r, &name);
    if (cu_tab.GetErrorString) cu_tab.GetErrorString(r, &s);
    snprintf(buf, len, "%s (%s)", name ? name : "CUDA error", s ? s : "unknown");
    return buf;
}

/* ---- NVRTC ------------------------------------------------------------- */

static pthread_once_t nvrtc_once = PTHREAD_ONCE_INIT;
static kwb_nvrtc_api nvrtc_tab;
static int nvrtc_ok;
static char nvrtc_err[768];

/* Open the first of the sonames in dir (or on the loader path if dir is NULL). */
static void *open_in(const char *dir, const char *const *sonames) {
    char path[1024];
    for (int i = 0; sonames[i]; i++) {
        if (dir) snprintf(path, sizeof path, "%s/%s", dir, sonames[i]);
        else snprintf(path, sizeof path, "%s", sonames[i]);
        void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (h) return h;
    }
    return NULL;
}

static void nvrtc_fill(void *h);

static void nvrtc_load(void) {
    static const char *const names[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so", NULL};
    char dir[512];
    const char *pick = getenv("KWB_NVRTC");   /* one library, named exactly */
    if (pick && *pick) {
        void *ph = dlopen(pick, RTLD_NOW | RTLD_LOCAL);
        if (!ph) { snprintf(nvrtc_err, sizeof nvrtc_err, "no NVRTC: KWB_NVRTC names %.400s, which cannot be loaded", pick); return; }
        return nvrtc_fill(ph);
    }
    snprintf(dir, sizeof dir, "%s/lib64", kwb_cuda_home());
    void *h = open_in(dir, names);
    if (h) snprintf(nvrtc_tab.dir, sizeof nvrtc_tab.dir, "%s", dir);
    else h = open_in(NULL, names);
    if (!h) {
        snprintf(nvrtc_err, sizeof nvrtc_err,
                 "no NVRTC: libnvrtc not found in %s or on the loader path (set CUDA_HOME)", dir);
        return;
    }
    nvrtc_fill(h);
}

static void nvrtc_fill(void *h) {
    const char *missing = NULL;
    kwb_nvrtc_api *t = &nvrtc_tab;
    LOAD(t, Version, "nvrtcVersion", 1);
    LOAD(t, GetErrorString, "nvrtcGetErrorString", 1);
    LOAD(t, CreateProgram, "nvrtcCreateProgram", 1);
    LOAD(t, DestroyProgram, "nvrtcDestroyProgram", 1);
    LOAD(t, CompileProgram, "nvrtcCompileProgram", 1);
    LOAD(t, GetProgramLogSize, "nvrtcGetProgramLogSize", 1);
    LOAD(t, GetProgramLog, "nvrtcGetProgramLog", 1);
    LOAD(t, GetCUBINSize, "nvrtcGetCUBINSize", 1);
    LOAD(t, GetCUBIN, "nvrtcGetCUBIN", 1);
    LOAD(t, GetPTXSize, "nvrtcGetPTXSize", 1);
    LOAD(t, GetPTX, "nvrtcGetPTX", 1);
    t->Version(&t->major, &t->minor);
    nvrtc_ok = 1;
    return;
fail:
    snprintf(nvrtc_err, sizeof nvrtc_err, "no NVRTC: the libnvrtc found lacks %s (too old)", missing);
}

const kwb_nvrtc_api *kwb_nvrtc(void) {
    pthread_once(&nvrtc_once, nvrtc_load);
    if (!nvrtc_ok) { kwb_fail(KWB_ENONVRTC, "%s", nvrtc_err); return NULL; }
    return &nvrtc_tab;
}

/* ---- NVML -------------------------------------------------------------- */

static pthread_once_t nvml_once = PTHREAD_ONCE_INIT;
static kwb_nvml_api nvml_tab;
static int nvml_ok;
static char nvml_err[256];

static void nvml_load(void) {
    const char *missing = NULL;
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) { snprintf(nvml_err, sizeof nvml_err, "no NVML: libnvidia-ml.so.1 not found"); return; }
    kwb_nvml_api *t = &nvml_tab;
    LOAD(t, Init, "nvmlInit_v2", 1);
    LOAD(t, DeviceGetHandleByPciBusId, "nvmlDeviceGetHandleByPciBusId_v2", 1);
    LOAD(t, DeviceGetClockInfo, "nvmlDeviceGetClockInfo", 1);
    LOAD(t, DeviceGetMaxClockInfo, "nvmlDeviceGetMaxClockInfo", 1);
    LOAD(t, DeviceGetTemperature, "nvmlDeviceGetTemperature", 1);
    LOAD(t, DeviceGetThrottleReasons,
         "nvmlDeviceGetCurrentClocksEventReasons\0nvmlDeviceGetCurrentClocksThrottleReasons", 0);
    LOAD(t, DeviceGetPowerUsage, "nvmlDeviceGetPowerUsage", 0);
    LOAD(t, SystemGetDriverVersion, "nvmlSystemGetDriverVersion", 1);
    int r = t->Init();
    if (r != 0) { snprintf(nvml_err, sizeof nvml_err, "NVML failed to start (nvmlInit returned %d)", r); return; }
    nvml_ok = 1;
    return;
fail:
    snprintf(nvml_err, sizeof nvml_err, "no NVML: libnvidia-ml.so.1 lacks %s", missing);
}

const kwb_nvml_api *kwb_nvml(void) {
    pthread_once(&nvml_once, nvml_load);
    if (!nvml_ok) { kwb_fail(KWB_ERUN, "%s", nvml_err); return NULL; }
    return &nvml_tab;
}

/* ---- cuBLAS ------------------------------------------------------------ */

static pthread_once_t cublas_once = PTHREAD_ONCE_INIT;
static kwb_cublas_api cublas_tab;
static int cublas_ok;
static char cublas_err[768];

static void cublas_load(void) {
    static const char *const names[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so", NULL};
    const char *missing = NULL;
    char dir[512];
    snprintf(dir, sizeof dir, "%s/lib64", kwb_cuda_home());
    void *h = open_in(dir, names);
    if (!h) h = open_in(NULL, names);
    if (!h) { snprintf(cublas_err, sizeof cublas_err, "no cuBLAS: libcublas not found in %s or on the loader path", dir); return; }
    kwb_cublas_api *t = &cublas_tab;
    LOAD(t, Create, "cublasCreate_v2", 1);
    LOAD(t, Destroy, "cublasDestroy_v2", 1);
    LOAD(t, SetStream, "cublasSetStream_v2", 1);
    LOAD(t, GemmEx, "cublasGemmEx", 1);
    LOAD(t, GetVersion, "cublasGetVersion_v2", 1);
    LOAD(t, SetWorkspace, "cublasSetWorkspace_v2", 0);
    cublas_ok = 1;
    return;
fail:
    snprintf(cublas_err, sizeof cublas_err, "no cuBLAS: libcublas lacks %s", missing);
}

const kwb_cublas_api *kwb_cublas(void) {
    pthread_once(&cublas_once, cublas_load);
    if (!cublas_ok) { kwb_fail(KWB_ERUN, "%s", cublas_err); return NULL; }
    return &cublas_tab;
}
