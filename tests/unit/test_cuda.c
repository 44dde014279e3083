/* test_cuda.c: the CUDA backend's C side without a GPU: arch names, dtypes,
 * the host checksum, NVRTC builds on threads with their resource reports
 * (or the no-NVRTC failure where libnvrtc is missing), and device calls
 * failing with one sentence when there is no driver. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kwb.h"
#include "unit.h"

static void test_arch_names(void) {
    CHECK(kwb_cuda_arch_valid("sm_80"));
    CHECK(kwb_cuda_arch_valid("sm_90a"));
    CHECK(kwb_cuda_arch_valid("sm_100a"));
    CHECK(!kwb_cuda_arch_valid("sm_9"));
    CHECK(!kwb_cuda_arch_valid("sm_90b"));
    CHECK(!kwb_cuda_arch_valid("compute_90"));
    CHECK(!kwb_cuda_arch_valid(NULL));
}

static void test_fp8_fp4_dtype_names(void) {
    CHECK_INT(kwb_cuda_dtype_from_name("e4m3"), KWB_CUDA_E4M3);
    CHECK_INT(kwb_cuda_dtype_from_name("e2m1"), KWB_CUDA_E2M1);
    CHECK_INT(kwb_cuda_dtype_from_name("bf16"), KWB_BF16);
    CHECK_INT(kwb_cuda_dtype_from_name("e5m2"), -1);
    CHECK_STR(kwb_cuda_dtype_name(KWB_CUDA_E2M1), "e2m1");
}

static void test_host_checksum_covers_every_byte(void) {
    unsigned char a[19];
    for (int i = 0; i < 19; i++) a[i] = (unsigned char)i;
    uint64_t base = kwb_cuda_checksum_host(a, sizeof a);
    CHECK_INT(kwb_cuda_checksum_host(a, 0), 0);
    for (int i = 0; i < 19; i++) {
        a[i] ^= 1;
        CHECK(kwb_cuda_checksum_host(a, sizeof a) != base);
        a[i] ^= 1;
    }
    CHECK(kwb_cuda_checksum_host(a, 18) != base);
}

static const char *src =
    "extern \"C\" __global__ void k(float *x) { __shared__ float s[256];\n"
    "  s[threadIdx.x] = x[threadIdx.x]; __syncthreads(); x[threadIdx.x] = s[255 - threadIdx.x] * K; }\n";

static void test_parallel_builds_report_resources(void) {
    int major, minor;
    char dir[] = "/tmp/kwb-unit-cuda.XXXXXX";
    CHECK(mkdtemp(dir));
    kwb_cuda_build b[6];
    const char *defs[6][2] = {{"K=1"}, {"K=2"}, {"K=3"}, {"K=4"}, {"K=5"}, {"K=6"}};
    for (int i = 0; i < 6; i++)
        b[i] = (kwb_cuda_build){.source = i == 3 ? "not cuda" : src, .arch = "sm_90", .defines = defs[i],
                                .build_dir = dir};
    kwb_cuda_module *m[6];
    int rcs[6];
    char *msgs[6], *logs[6];
    int rc = kwb_cuda_compile_many(b, 6, 3, m, rcs, msgs, logs);
    if (kwb_cuda_nvrtc_version(&major, &minor) != 0) {   /* no NVRTC on this machine */
        CHECK_INT(rc, KWB_EIO);
        CHECK(strncmp(kwb_last_error(), "no NVRTC", 8) == 0);
        rmdir(dir);
        return;
    }
    CHECK_INT(rc, 0);
    for (int i = 0; i < 6; i++) {
        if (i == 3) {
            CHECK_INT(rcs[i], KWB_ECOMPILE);
            CHECK(msgs[i] && strstr(msgs[i], "NVRTC rejected kernel.cu"));
            CHECK(logs[i] && strstr(logs[i], "error"));
        } else {
            CHECK_INT(rcs[i], 0);
            CHECK_INT(kwb_cuda_module_nkernels(m[i]), 1);
            const kwb_cuda_kernel_info *k = kwb_cuda_module_kernel(m[i], 0);
            CHECK_STR(k->name, "k");
            CHECK_INT(k->static_smem, 1024);
            CHECK(k->registers > 0 && k->registers < 64);
            CHECK_INT(k->spill_stores, 0);
            CHECK(!kwb_cuda_module_cached(m[i]));
        }
        kwb_cuda_module_free(m[i]);
        free(msgs[i]);
        free(logs[i]);
    }
    /* the same build again comes from the directory */
    kwb_cuda_module *again = NULL;
    CHECK_INT(kwb_cuda_compile(&b[0], &again, NULL), 0);
    CHECK(kwb_cuda_module_cached(again));
    CHECK_INT(kwb_cuda_module_kernel(again, 0)->static_smem, 1024);
    kwb_cuda_module_free(again);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK_INT(system(cmd), 0);
}

/* Builds in the background: the job owns copies of the specs (the caller's
 * strings are overwritten at once), finishes on its own, and a later compile of
 * each finds it in the directory; a failed one leaves nothing there. */
/* How many threads this process has (/proc/self/task). */
static int task_count(void) {
    DIR *d = opendir("/proc/self/task");
    if (!d) return 1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static void test_prebuild_copies_its_specs_and_fills_the_directory(void) {
    int major, minor;
    if (kwb_cuda_nvrtc_version(&major, &minor) != 0) return;   /* no NVRTC on this machine */
    char dir[] = "/tmp/kwb-unit-prebuild.XXXXXX";
    CHECK(mkdtemp(dir));
    char srcs[3][512], defs_s[3][16], dir_copy[64];
    const char *defs[3][2];
    kwb_cuda_build b[3];
    snprintf(dir_copy, sizeof dir_copy, "%s", dir);
    for (int i = 0; i < 3; i++) {
        snprintf(srcs[i], sizeof srcs[i], "%s", i == 2 ? "not cuda at all" : src);
        snprintf(defs_s[i], sizeof defs_s[i], "K=%d", 10 + i);
        defs[i][0] = defs_s[i];
        defs[i][1] = NULL;
        b[i] = (kwb_cuda_build){.source = srcs[i], .arch = "sm_90", .defines = defs[i], .build_dir = dir_copy};
    }
    CHECK_INT(kwb_cuda_prebuild(b, 3, 2), 0);
    kwb_cuda_build kept[3];
    memcpy(kept, b, sizeof b);
    char saved[3][512];
    for (int i = 0; i < 3; i++) memcpy(saved[i], srcs[i], sizeof srcs[i]);
    memset(srcs, 'x', sizeof srcs);          /* the job must not read the caller's strings */
    memset(defs_s, 'y', sizeof defs_s);
    for (int w = 0; w < 6000 && kwb_cuda_prebuilds_running() > 0; w++) usleep(10000);
    CHECK_INT(kwb_cuda_prebuilds_running(), 0);
    /* the detached build thread, done, may still be on its way out: LeakSanitizer's check
       at exit can crash on a thread exiting under it, so wait until this is the one thread */
    for (int w = 0; w < 500 && task_count() > 1; w++) usleep(10000);
    for (int i = 0; i < 3; i++) {
        memcpy(srcs[i], saved[i], sizeof srcs[i]);
        snprintf(defs_s[i], sizeof defs_s[i], "K=%d", 10 + i);
    }
    for (int i = 0; i < 3; i++) {
        kwb_cuda_module *m = NULL;
        char *log = NULL;
        int rc = kwb_cuda_compile(&kept[i], &m, &log);
        if (i == 2) {
            CHECK_INT(rc, KWB_ECOMPILE);
        } else {
            CHECK_INT(rc, 0);
            CHECK(kwb_cuda_module_cached(m));
            CHECK_INT(kwb_cuda_module_kernel(m, 0)->static_smem, 1024);
        }
        kwb_cuda_module_free(m);
        free(log);
    }
    CHECK_INT(kwb_cuda_prebuild(b, 0, 2), 0);   /* nothing to build: nothing started */
    CHECK_INT(kwb_cuda_prebuilds_running(), 0);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK_INT(system(cmd), 0);
}

static void test_device_calls_fail_plainly_without_a_driver(void) {
    int n = -1;
    if (kwb_cuda_device_count(&n) == 0) return;   /* a GPU machine: tests/gpu covers it */
    CHECK_STR(kwb_last_error(), "no CUDA driver: libcuda.so.1 not found");
    CHECK(kwb_cuda_buffer_new(KWB_F32, 16) == NULL);
    CHECK_STR(kwb_last_error(), "no CUDA driver: libcuda.so.1 not found");
    kwb_cuda_plan *p = kwb_cuda_plan_new();
    CHECK(p);
    CHECK_INT(kwb_cuda_plan_run(p), KWB_ERUN);
    CHECK_STR(kwb_last_error(), "no CUDA driver: libcuda.so.1 not found");
    kwb_cuda_plan_free(p);
    double s;
    CHECK_INT(kwb_cuda_measure_copy(1 << 20, 1, &s), KWB_ERUN);
}

/* A row-major [M, K] x [N, K]^T -> [M, N] gemm in cuBLAS's terms (kwb.h). */
static kwb_cuda_gemm row_major_gemm(int M, int N, int K) {
    kwb_cuda_gemm g;
    memset(&g, 0, sizeof g);
    g.trans_a = 1;
    g.m = N, g.n = M, g.k = K;
    g.lda = K, g.ldb = K, g.ldc = N;
    g.alpha = 1;
    return g;
}

static void test_gemm_check_pins_shapes_types_and_extents(void) {
    int bf[3] = {KWB_BF16, KWB_BF16, KWB_F32};
    kwb_cuda_gemm g = row_major_gemm(3, 5, 16);   /* W [5, 16], X [3, 16], Y [3, 5] */
    uint64_t len[3] = {5 * 16, 3 * 16, 3 * 5};
    CHECK_INT(kwb_cuda_gemm_check(&g, bf, len), 0);
    /* one element short in each operand in turn */
    for (int i = 0; i < 3; i++) {
        uint64_t shorter[3] = {len[0], len[1], len[2]};
        shorter[i]--;
        CHECK_INT(kwb_cuda_gemm_check(&g, bf, shorter), KWB_EINVAL);
    }
    CHECK_STR(kwb_last_error(), "gemm C: 15 elements from offset 0 pass the end of its buffer of 14");
    /* an offset that moves B past its end: expert 1 of two in a [2, 3, 16] buffer is fine, 2 is not */
    uint64_t two[3] = {len[0], 2 * 3 * 16, len[2]};
    g.b_offset = 3 * 16;
    CHECK_INT(kwb_cuda_gemm_check(&g, bf, two), 0);
    g.b_offset = 3 * 16 + 1;
    CHECK_INT(kwb_cuda_gemm_check(&g, bf, two), KWB_EINVAL);
    CHECK_STR(kwb_last_error(), "gemm B: 48 elements from offset 49 pass the end of its buffer of 96");
    g = row_major_gemm(3, 5, 16);
    g.lda = 15;
    CHECK_INT(kwb_cuda_gemm_check(&g, bf, len), KWB_EINVAL);
    CHECK_STR(kwb_last_error(), "gemm A: its leading dimension 15 is under its 16 rows as stored");
    g = row_major_gemm(0, 5, 16);
    CHECK_INT(kwb_cuda_gemm_check(&g, bf, len), KWB_EINVAL);
    CHECK_STR(kwb_last_error(), "gemm dimensions must be >= 1 (got m 5, n 0, k 16)");
    g = row_major_gemm(3, 5, 16);
    int mixed[3] = {KWB_BF16, KWB_F16, KWB_F32};
    CHECK_INT(kwb_cuda_gemm_check(&g, mixed, len), KWB_EINVAL);
    CHECK_STR(kwb_last_error(), "gemm A and B must both be bf16, f16 or f32 (got bf16 and f16)");
    int i32c[3] = {KWB_BF16, KWB_BF16, KWB_I32};
    CHECK_INT(kwb_cuda_gemm_check(&g, i32c, len), KWB_EINVAL);
    CHECK_STR(kwb_last_error(), "gemm C must be bf16 or f32 (got i32)");
    g.trans_b = 2;
    CHECK_INT(kwb_cuda_gemm_check(&g, bf, len), KWB_EINVAL);
    /* as stored, untransposed: A m x k with lda >= m */
    kwb_cuda_gemm n = {0};
    n.m = 4, n.n = 2, n.k = 3, n.lda = 4, n.ldb = 3, n.ldc = 4;
    uint64_t nl[3] = {12, 6, 8};
    CHECK_INT(kwb_cuda_gemm_check(&n, bf, nl), 0);
    n.lda = 3;
    CHECK_INT(kwb_cuda_gemm_check(&n, bf, nl), KWB_EINVAL);
}

static void test_gemm_step_needs_buffers(void) {
    kwb_cuda_plan *p = kwb_cuda_plan_new();
    kwb_cuda_gemm g = row_major_gemm(1, 1, 1);
    CHECK_INT(kwb_cuda_plan_add_gemm(p, &g), KWB_EINVAL);
    CHECK_STR(kwb_last_error(), "a gemm step needs buffers a, b and c");
    kwb_cuda_plan_free(p);
}

int main(void) {
    RUN(test_arch_names);
    RUN(test_fp8_fp4_dtype_names);
    RUN(test_host_checksum_covers_every_byte);
    RUN(test_parallel_builds_report_resources);
    RUN(test_prebuild_copies_its_specs_and_fills_the_directory);
    RUN(test_device_calls_fail_plainly_without_a_driver);
    RUN(test_gemm_check_pins_shapes_types_and_extents);
    RUN(test_gemm_step_needs_buffers);
    return UNIT_EXIT();
}
