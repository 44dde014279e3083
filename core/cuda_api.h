/* cuda_api.h: the parts of the CUDA driver, NVRTC, NVML and cuBLAS APIs kwb
 * calls, declared here so kwb builds with no CUDA headers, and loaded with
 * dlopen on first use (cuda_load.c). The values of the enums are the ones of
 * the public headers, which NVIDIA keeps stable across versions. */
#ifndef KWB_CUDA_API_H
#define KWB_CUDA_API_H
#include <stddef.h>
#include <stdint.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphExec_st *CUgraphExec;

enum {
    CUDA_SUCCESS = 0, CUDA_ERROR_INVALID_VALUE = 1, CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_STUB_LIBRARY = 34, CUDA_ERROR_NO_DEVICE = 100,
};
enum {
    CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1, CU_DEVICE_ATTRIBUTE_CLOCK_RATE = 13,
    CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE = 36,
    CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH = 37, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
    CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
    CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING = 41, CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS = 88,
};
enum {
    CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1,
    CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES = 2, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES = 3,
    CU_FUNC_ATTRIBUTE_NUM_REGS = 4, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
    CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED = 14,
};
enum { CU_STREAM_NON_BLOCKING = 1, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1, CU_EVENT_RECORD_EXTERNAL = 1 };
enum { CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4 };

typedef struct CUlaunchAttribute {
    int id;
    char pad[4];
    union { char bytes[64]; struct { unsigned x, y, z; } clusterDim; } value;
} CUlaunchAttribute;

typedef struct CUlaunchConfig {
    unsigned gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes;
    CUstream hStream;
    CUlaunchAttribute *attrs;
    unsigned numAttrs;
} CUlaunchConfig;

/* The driver entry points kwb uses (the versioned names the headers map to). */
typedef struct kwb_cu_api {
    CUresult (*Init)(unsigned);
    CUresult (*DriverGetVersion)(int *);
    CUresult (*GetErrorString)(CUresult, const char **);
    CUresult (*GetErrorName)(CUresult, const char **);
    CUresult (*DeviceGetCount)(int *);
    CUresult (*DeviceGet)(CUdevice *, int);
    CUresult (*DeviceGetName)(char *, int, CUdevice);
    CUresult (*DeviceGetAttribute)(int *, int, CUdevice);
    CUresult (*DeviceTotalMem)(size_t *, CUdevice);
    CUresult (*DeviceGetPCIBusId)(char *, int, CUdevice);
    CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*CtxSetCurrent)(CUcontext);
    CUresult (*CtxSynchronize)(void);
    CUresult (*MemGetInfo)(size_t *, size_t *);
    CUresult (*MemAlloc)(CUdeviceptr *, size_t);
    CUresult (*MemFree)(CUdeviceptr);
    CUresult (*MemAllocHost)(void **, size_t);
    CUresult (*MemFreeHost)(void *);
    CUresult (*MemcpyHtoD)(CUdeviceptr, const void *, size_t);
    CUresult (*MemcpyDtoH)(void *, CUdeviceptr, size_t);
    CUresult (*MemcpyDtoD)(CUdeviceptr, CUdeviceptr, size_t);
    CUresult (*MemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
    CUresult (*MemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
    CUresult (*MemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream);
    CUresult (*MemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
    CUresult (*MemsetD16Async)(CUdeviceptr, unsigned short, size_t, CUstream);
    CUresult (*MemsetD32Async)(CUdeviceptr, unsigned, size_t, CUstream);
    CUresult (*ModuleLoadData)(CUmodule *, const void *);
    CUresult (*ModuleUnload)(CUmodule);
    CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
    CUresult (*FuncGetAttribute)(int *, int, CUfunction);
    CUresult (*FuncSetAttribute)(CUfunction, int, int);
    CUresult (*FuncGetParamInfo)(CUfunction, size_t, size_t *, size_t *);   /* 12.4+, may be NULL */
    CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, CUstream, void **, void **);
    CUresult (*LaunchKernelEx)(const CUlaunchConfig *, CUfunction, void **, void **);  /* may be NULL */
    CUresult (*StreamCreate)(CUstream *, unsigned);
    CUresult (*StreamSynchronize)(CUstream);
    CUresult (*EventCreate)(CUevent *, unsigned);
    CUresult (*EventDestroy)(CUevent);
    CUresult (*EventRecord)(CUevent, CUstream);
    CUresult (*EventRecordWithFlags)(CUevent, CUstream, unsigned);   /* may be NULL */
    CUresult (*EventElapsedTime)(float *, CUevent, CUevent);
    CUresult (*StreamBeginCapture)(CUstream, int);
    CUresult (*StreamEndCapture)(CUstream, CUgraph *);
    CUresult (*GraphInstantiate)(CUgraphExec *, CUgraph, unsigned long long);
    CUresult (*GraphLaunch)(CUgraphExec, CUstream);
    CUresult (*GraphExecDestroy)(CUgraphExec);
    CUresult (*GraphDestroy)(CUgraph);
    /* cuTensorMapEncodeTiled (12.0+, may be NULL): the map is 128 opaque
     * bytes aligned to 64, the enums plain ints here */
    CUresult (*TensorMapEncodeTiled)(void *, int, uint32_t, void *, const uint64_t *, const uint64_t *,
                                     const uint32_t *, const uint32_t *, int, int, int, int);
} kwb_cu_api;

typedef struct _nvrtcProgram *nvrtcProgram;
typedef struct kwb_nvrtc_api {
    int (*Version)(int *, int *);
    const char *(*GetErrorString)(int);
    int (*CreateProgram)(nvrtcProgram *, const char *, const char *, int, const char *const *,
                         const char *const *);
    int (*DestroyProgram)(nvrtcProgram *);
    int (*CompileProgram)(nvrtcProgram, int, const char *const *);
    int (*GetProgramLogSize)(nvrtcProgram, size_t *);
    int (*GetProgramLog)(nvrtcProgram, char *);
    int (*GetCUBINSize)(nvrtcProgram, size_t *);
    int (*GetCUBIN)(nvrtcProgram, char *);
    int (*GetPTXSize)(nvrtcProgram, size_t *);
    int (*GetPTX)(nvrtcProgram, char *);
    int major, minor;
    char dir[512];        /* where it was found ("" for the loader path) */
} kwb_nvrtc_api;

typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct kwb_nvml_api {
    int (*Init)(void);
    int (*DeviceGetHandleByPciBusId)(const char *, nvmlDevice_t *);
    int (*DeviceGetClockInfo)(nvmlDevice_t, int, unsigned *);
    int (*DeviceGetMaxClockInfo)(nvmlDevice_t, int, unsigned *);
    int (*DeviceGetTemperature)(nvmlDevice_t, int, unsigned *);
    int (*DeviceGetThrottleReasons)(nvmlDevice_t, unsigned long long *);
    int (*DeviceGetPowerUsage)(nvmlDevice_t, unsigned *);
    int (*SystemGetDriverVersion)(char *, unsigned);
} kwb_nvml_api;

typedef struct cublasContext *cublasHandle_t;
typedef struct kwb_cublas_api {
    int (*Create)(cublasHandle_t *);
    int (*Destroy)(cublasHandle_t);
    int (*SetStream)(cublasHandle_t, CUstream);
    int (*GemmEx)(cublasHandle_t, int, int, int, int, int, const void *, const void *, int, int,
                  const void *, int, int, const void *, void *, int, int, int, int);
    int (*GetVersion)(cublasHandle_t, int *);
    int (*SetWorkspace)(cublasHandle_t, void *, size_t);   /* NULL where the library lacks it */
} kwb_cublas_api;

/* Each loads its library on first use and returns the table, or NULL with
 * the reason recorded for kwb_last_error() (one sentence, e.g. "no CUDA
 * driver: libcuda.so.1 not found"). Thread-safe. */
const kwb_cu_api *kwb_cu(void);
const kwb_nvrtc_api *kwb_nvrtc(void);
const kwb_nvml_api *kwb_nvml(void);
const kwb_cublas_api *kwb_cublas(void);
/* The CUDA toolkit directory: $CUDA_HOME, else /usr/local/cuda. */
const char *kwb_cuda_home(void);
/* "CUDA_ERROR_OUT_OF_MEMORY (out of memory)" for a driver result. */
const char *kwb_cu_errstr(CUresult r, char *buf, size_t len);

#endif
