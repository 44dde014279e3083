/* test_host.c: the host backend through the C API: compile, cache, libffi calls, timing */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "kwb.h"
#include "proc.h"
#include "unit.h"

static char dir[64];

static void test_compile_call_and_cache(void) {
    kwb_host_build b = {.source = "double axpy(double a, double x, long y) { return a * x + y; }\n",
                        .name = "axpy.c", .build_dir = dir};
    kwb_host_module *m = NULL, *m2 = NULL;
    CHECK_INT(kwb_host_compile(&b, &m, NULL), 0);
    CHECK_INT(kwb_host_module_cached(m), 0);
    CHECK_INT(kwb_host_compile(&b, &m2, NULL), 0);
    CHECK_INT(kwb_host_module_cached(m2), 1);
    CHECK_STR(kwb_host_module_hash(m2), kwb_host_module_hash(m));
    kwb_ctype args[] = {KWB_C_F64, KWB_C_F64, KWB_C_I64};
    kwb_host_fn *f = kwb_host_fn_new(m, "axpy", KWB_C_F64, args, 3);
    CHECK(f != NULL);
    kwb_value v[3] = {{.f64 = 2.5}, {.f64 = 4}, {.i64 = -3}}, r;
    CHECK_INT(kwb_host_fn_call(f, v, &r), 0);
    CHECK_NEAR(r.f64, 7.0, 0);
    kwb_host_fn_free(f);
    kwb_host_module_free(m);
    kwb_host_module_free(m2);
}

static void test_missing_symbol_message(void) {
    kwb_host_build b = {.source = "int one(void) { return 1; }\n", .build_dir = dir};
    kwb_host_module *m = NULL;
    CHECK_INT(kwb_host_compile(&b, &m, NULL), 0);
    CHECK(kwb_host_fn_new(m, "two", KWB_C_I32, NULL, 0) == NULL);
    CHECK(strncmp(kwb_last_error(), "no function two in module ", 26) == 0);
    kwb_ctype ok_args[] = {KWB_C_VOID};
    CHECK(kwb_host_fn_new(m, "one", KWB_C_I32, ok_args, 1) == NULL);   /* void is no argument type */
    kwb_host_fn *one = kwb_host_fn_new(m, "one", KWB_C_I32, NULL, 0);
    kwb_value r;
    kwb_host_fn_call(one, NULL, &r);
    CHECK_INT(r.i32, 1);
    kwb_host_fn_free(one);
    kwb_host_module_free(m);
}

static void test_compile_error_keeps_the_log(void) {
    kwb_host_build b = {.source = "int f(void) { return }\n", .name = "broken.c", .build_dir = dir};
    kwb_host_module *m = NULL;
    char *log = NULL;
    CHECK_INT(kwb_host_compile(&b, &m, &log), KWB_ECOMPILE);
    CHECK(m == NULL);
    CHECK(log && strstr(log, "broken.c:1"));
    free(log);
}

static void test_unsigned_and_float_returns(void) {
    kwb_host_build b = {.source = "unsigned big(void) { return 4000000000u; }\n"
                                  "float half(float x) { return x / 2; }\n", .build_dir = dir};
    kwb_host_module *m = NULL;
    CHECK_INT(kwb_host_compile(&b, &m, NULL), 0);
    kwb_host_fn *big = kwb_host_fn_new(m, "big", KWB_C_U32, NULL, 0);
    kwb_ctype fa[] = {KWB_C_F32};
    kwb_host_fn *half = kwb_host_fn_new(m, "half", KWB_C_F32, fa, 1);
    kwb_value r, x = {.f32 = 3};
    kwb_host_fn_call(big, NULL, &r);
    CHECK_INT(r.u32, 4000000000u);
    kwb_host_fn_call(half, &x, &r);
    CHECK_NEAR(r.f32, 1.5, 0);
    kwb_host_fn_free(big);
    kwb_host_fn_free(half);
    kwb_host_module_free(m);
}

static void test_timing_samples_until_the_cap(void) {
    kwb_host_build b = {.source = "void nothing(void) {}\n", .build_dir = dir};
    kwb_host_module *m = NULL;
    CHECK_INT(kwb_host_compile(&b, &m, NULL), 0);
    kwb_host_fn *f = kwb_host_fn_new(m, "nothing", KWB_C_VOID, NULL, 0);
    kwb_time_opts o;
    kwb_time_opts_default(&o);
    o.max_samples = 20;
    o.min_samples = 20;
    o.target_ci = 0;          /* never converges: the sample bound must end it */
    kwb_stats st;
    CHECK_INT(kwb_host_fn_time(f, NULL, &o, &st), 0);
    CHECK_INT(st.n, 20);
    CHECK_INT(st.capped, 1);
    CHECK(st.batch > 1);      /* an empty call is batched up to min_sample_s */
    kwb_host_fn_free(f);
    kwb_host_module_free(m);
}

static void test_proc_captures_output_and_status(void) {
    const char *argv[] = {"sh", "-c", "echo out; echo err >&2; exit 3", NULL};
    char *out = NULL;
    CHECK_INT(kwb_proc_run(argv, &out, 1024), 3);
    CHECK_STR(out, "out\nerr\n");
    free(out);
    const char *big[] = {"sh", "-c", "yes | head -c 100000", NULL};
    CHECK_INT(kwb_proc_run(big, &out, 10), 0);
    CHECK_INT(strlen(out), 10);   /* capped, the rest drained */
    free(out);
    const char *none[] = {"/nonexistent/kwb-no-such-program", NULL};
    CHECK(kwb_proc_run(none, NULL, 10) < 0);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/kwb-unit-host.%ld", (long)getpid());
    RUN(test_compile_call_and_cache);
    RUN(test_missing_symbol_message);
    RUN(test_compile_error_keeps_the_log);
    RUN(test_unsigned_and_float_returns);
    RUN(test_timing_samples_until_the_cap);
    RUN(test_proc_captures_output_and_status);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) return 1;
    return UNIT_EXIT();
}
