/* dtype.c: element types and the f16 / bf16 conversions */
#include <string.h>

#include "kwb.h"

static const struct { const char *name; size_t size; int is_float; } dtypes[KWB_DTYPE_COUNT] = {
    [KWB_F32] = {"f32", 4, 1},  [KWB_F64] = {"f64", 8, 1},  [KWB_F16] = {"f16", 2, 1},
    [KWB_BF16] = {"bf16", 2, 1}, [KWB_I8] = {"i8", 1, 0},   [KWB_I32] = {"i32", 4, 0},
    [KWB_I64] = {"i64", 8, 0},  [KWB_U8] = {"u8", 1, 0},    [KWB_U32] = {"u32", 4, 0},
    [KWB_U64] = {"u64", 8, 0},
};

const char *kwb_dtype_name(kwb_dtype t) { return (unsigned)t < KWB_DTYPE_COUNT ? dtypes[t].name : "?"; }
size_t kwb_dtype_size(kwb_dtype t) { return (unsigned)t < KWB_DTYPE_COUNT ? dtypes[t].size : 0; }
int kwb_dtype_is_float(kwb_dtype t) { return (unsigned)t < KWB_DTYPE_COUNT && dtypes[t].is_float; }

int kwb_dtype_from_name(const char *name) {
    for (int t = 0; t < KWB_DTYPE_COUNT; t++)
        if (strcmp(name, dtypes[t].name) == 0) return t;
    return -1;
}

static uint32_t f32_bits(float x) { uint32_t u; memcpy(&u, &x, 4); return u; }
static float bits_f32(uint32_t u) { float x; memcpy(&x, &u, 4); return x; }

uint16_t kwb_f32_to_bf16(float x) {
    uint32_t u = f32_bits(x);
    if ((u & 0x7fffffffu) > 0x7f800000u)          /* NaN: keep it a quiet NaN */
        return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);               /* round to nearest even */
    return (uint16_t)(u >> 16);
}

float kwb_bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

uint16_t kwb_f32_to_f16(float x) {
    uint32_t u = f32_bits(x);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return sign | 0x7e00u;           /* NaN */
    if (a >= 0x477ff000u) return sign | 0x7c00u;          /* >= 65520 rounds to Inf */
    if (a < 0x38800000u) {                                /* below 2^-14: subnormal or zero */
        if (a < 0x33000000u) return sign;                 /* below half the least subnormal */
        uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;
        /* value = m * 2^(e-150); in units of 2^-24 that is m >> (126 - e) */
        uint32_t shift = 126 - e;
        uint32_t q = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1u))) q++;
        return sign | (uint16_t)q;
    }
    uint32_t r = a + 0xfffu + ((a >> 13) & 1u);           /* round to nearest even */
    return sign | (uint16_t)(((r >> 13) - (112u << 10)) & 0x7fffu);
}

float kwb_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f) return bits_f32(sign | 0x7f800000u | (m << 13));
    if (e == 0) {
        float v = (float)m * (1.0f / 16777216.0f);        /* m * 2^-24 */
        return sign ? -v : v;
    }
    return bits_f32(sign | ((e + 112u) << 23) | (m << 13));
}
