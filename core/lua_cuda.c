/* lua_cuda.c: the CUDA backend's Lua bindings: versions and devices, doctor
 * measurements, and kwb_lua_open_cuda, which fills kwb.core with them and
 * with the other files' parts: compile and modules (lua_cuda_compile.c),
 * device buffers and comparison (lua_cuda_buffer.c), tensor maps
 * (lua_cuda_tmap.c), launch plans and timing (lua_cuda_plan.c) and a plan's
 * cuBLAS gemm steps (lua_cuda_gemm.c). lua/kwb/cuda.lua wraps them into
 * kwb.cuda. */
#include <lauxlib.h>
#include <lua.h>

#include "lua_cuda.h"

/* ---- versions and devices ---------------------------------------------- */

static int l_nvrtc_version(lua_State *L) {
    int a, b;
    if (kwb_cuda_nvrtc_version(&a, &b)) return kwb_lua_fail(L, kwb_lua_code(kwb_last_status(), "no-nvrtc"), kwb_last_error());
    lua_pushfstring(L, "%d.%d", a, b);
    return 1;
}

static int l_device_count(lua_State *L) {
    int n = 0;
    int rc = kwb_cuda_device_count(&n);
    if (rc) return fail_run(L, "no-driver");
    lua_pushinteger(L, n);
    return 1;
}

static int l_device_info(lua_State *L) {
    kwb_cuda_device_info d;
    int rc = kwb_cuda_device_info_get((int)luaL_optinteger(L, 1, 0), &d);
    if (rc) return fail_run(L, "no-driver");
    lua_createtable(L, 0, 16);
    lua_pushstring(L, d.name); lua_setfield(L, -2, "name");
    lua_pushstring(L, d.pci_bus_id); lua_setfield(L, -2, "pci_bus_id");
    lua_pushfstring(L, "%d.%d", d.cc_major, d.cc_minor); lua_setfield(L, -2, "cc");
    lua_pushfstring(L, "sm_%d%d", d.cc_major, d.cc_minor); lua_setfield(L, -2, "arch");
    lua_pushinteger(L, d.sms); lua_setfield(L, -2, "sms");
    lua_pushinteger(L, d.l2_bytes); lua_setfield(L, -2, "l2_bytes");
    lua_pushinteger(L, (lua_Integer)d.memory_bytes); lua_setfield(L, -2, "memory_bytes");
    lua_pushinteger(L, d.clock_khz); lua_setfield(L, -2, "clock_khz");
    lua_pushinteger(L, d.mem_clock_khz); lua_setfield(L, -2, "mem_clock_khz");
    lua_pushinteger(L, d.bus_width); lua_setfield(L, -2, "bus_width");
    lua_pushinteger(L, d.smem_optin); lua_setfield(L, -2, "smem_optin");
    lua_pushinteger(L, d.max_threads); lua_setfield(L, -2, "max_threads");
    lua_pushboolean(L, d.unified_addressing); lua_setfield(L, -2, "unified_addressing");
    lua_pushboolean(L, d.pageable_access); lua_setfield(L, -2, "pageable_access");
    lua_pushfstring(L, "%d.%d", d.driver_version / 1000, (d.driver_version % 1000) / 10);
    lua_setfield(L, -2, "cuda_driver_version");
    return 1;
}

/* mem_info() -> free, total: device memory in bytes (the primary context's
 * device), or nil, message, info. */
static int l_mem_info(lua_State *L) {
    uint64_t f = 0, t = 0;
    if (kwb_cuda_mem_info(&f, &t)) return fail_run(L, "no-driver");
    lua_pushinteger(L, (lua_Integer)f);
    lua_pushinteger(L, (lua_Integer)t);
    return 2;
}

/* ---- doctor ------------------------------------------------------------ */

static int l_clocks(lua_State *L) {
    int32_t mhz, temp;
    uint64_t reasons;
    int rc = kwb_cuda_clocks_read(&mhz, &temp, &reasons);
    if (rc) return fail_run(L, "no-nvml");
    lua_createtable(L, 0, 3);
    lua_pushinteger(L, mhz); lua_setfield(L, -2, "sm_mhz");
    lua_pushinteger(L, temp); lua_setfield(L, -2, "temp");
    lua_pushinteger(L, (lua_Integer)reasons); lua_setfield(L, -2, "reasons");
    return 1;
}

static int l_measure_copy(lua_State *L) {
    lua_Integer bytes = luaL_checkinteger(L, 1), reps = luaL_optinteger(L, 2, 10);
    if (bytes < 4 || reps < 1) return luaL_error(L, "copy needs bytes >= 4 and reps >= 1");
    double s = 0;
    int rc = kwb_cuda_measure_copy((uint64_t)bytes, (uint32_t)reps, &s);
    if (rc) return fail_run(L, "run-failed");
    lua_pushnumber(L, s);
    return 1;
}

static int l_measure_fma(lua_State *L) {
    double r = 0;
    int rc = kwb_cuda_measure_fma(&r);
    if (rc) return fail_run(L, "run-failed");
    lua_pushnumber(L, r);
    return 1;
}

static int l_measure_bf16(lua_State *L) {
    lua_Integer n = luaL_optinteger(L, 1, 8192);
    if (n < 256 || n > 65536) return luaL_error(L, "matrix size must be in 256..65536 (got %d)", (int)n);
    double r = 0;
    const char *via = "";
    int rc = kwb_cuda_measure_bf16((uint32_t)n, lua_toboolean(L, 2), &r, &via);
    if (rc) return fail_run(L, "run-failed");
    lua_pushnumber(L, r);
    lua_pushstring(L, via);
    return 2;
}

static int l_set_build_dir(lua_State *L) {
    kwb_cuda_set_build_dir(luaL_checkstring(L, 1));
    return 0;
}

static int l_home(lua_State *L) {
    lua_pushstring(L, kwb_cuda_home());
    char buf[600];
    lua_pushstring(L, kwb_cuda_nvcc_path(buf, sizeof buf));
    return 2;
}

static int l_arch_valid(lua_State *L) {
    lua_pushboolean(L, kwb_cuda_arch_valid(luaL_checkstring(L, 1)));
    return 1;
}

void kwb_lua_open_cuda(lua_State *L) {
    static const luaL_Reg fns[] = {
        {"cuda_nvrtc_version", l_nvrtc_version}, {"cuda_device_count", l_device_count},
        {"cuda_device_info", l_device_info}, {"cuda_mem_info", l_mem_info},
        {"cuda_clocks", l_clocks}, {"cuda_measure_copy", l_measure_copy},
        {"cuda_measure_fma", l_measure_fma}, {"cuda_measure_bf16", l_measure_bf16},
        {"cuda_set_build_dir", l_set_build_dir}, {"cuda_home", l_home},
        {"cuda_arch_valid", l_arch_valid}, {NULL, NULL},
    };
    luaL_setfuncs(L, fns, 0);   /* [core] */
    kwb_lua_cuda_open_compile(L);   /* cuda_compile, _compile_many, _prebuild, _prebuilds_running, _fn */
    kwb_lua_cuda_open_buffer(L);    /* cuda_buffer, _compare, _redzones, _guard_layout, _checksum_host */
    kwb_lua_cuda_open_tmap(L);      /* cuda_tensor_map */
    kwb_lua_cuda_open_plan(L);      /* cuda_plan */
    lua_pushstring(L, kwb_cuda_builtin_source);
    lua_setfield(L, -2, "cuda_builtin_source");
    lua_pushstring(L, kwb_cuda_wmma_source);
    lua_setfield(L, -2, "cuda_wmma_source");
}
