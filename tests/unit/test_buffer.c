/* test_buffer.c: dtypes, conversions, seeded fills, poison, compare, stats */
#include <stdint.h>
#include <stdlib.h>

#include "kwb.h"
#include "unit.h"

static void test_bf16_rounds_to_nearest_even(void) {
    CHECK_INT(kwb_f32_to_bf16(1.0f), 0x3f80);
    /* 1 + 2^-8 is exactly half-way between bf16 1.0 and 1.0078125: ties go to even */
    CHECK_INT(kwb_f32_to_bf16(1.00390625f), 0x3f80);
    CHECK_INT(kwb_f32_to_bf16(1.01171875f), 0x3f82);
    CHECK_NEAR(kwb_bf16_to_f32(0x4049), 3.140625, 0);
}

static void test_f16_round_trips_and_saturates(void) {
    CHECK_INT(kwb_f32_to_f16(1.0f), 0x3c00);
    CHECK_INT(kwb_f32_to_f16(65504.0f), 0x7bff);
    CHECK_INT(kwb_f32_to_f16(65520.0f), 0x7c00);          /* rounds up to Inf */
    CHECK_INT(kwb_f32_to_f16(5.9604644775390625e-08f), 0x0001);   /* least subnormal */
    CHECK_NEAR(kwb_f16_to_f32(0x0001), 5.9604644775390625e-08, 0);
    CHECK_NEAR(kwb_f16_to_f32(kwb_f32_to_f16(-0.333251953125f)), -0.333251953125, 0);
    for (uint32_t h = 0; h < 0x7c00; h++)                  /* every finite positive half */
        CHECK_INT(kwb_f32_to_f16(kwb_f16_to_f32((uint16_t)h)), h);
}

static void test_fill_is_a_function_of_seed_and_index(void) {
    kwb_buffer *a = kwb_buffer_new(KWB_F32, 1000), *b = kwb_buffer_new(KWB_F32, 1000);
    CHECK(a && b);
    kwb_buffer_fill_uniform(a, 7, -1, 1);
    kwb_buffer_fill_uniform(b, 7, -1, 1);
    char ha[65], hb[65];
    kwb_buffer_checksum(a, ha);
    kwb_buffer_checksum(b, hb);
    CHECK_STR(ha, hb);
    kwb_buffer_fill_uniform(b, 8, -1, 1);
    kwb_buffer_checksum(b, hb);
    CHECK(strcmp(ha, hb) != 0);
    double lo = 1, hi = -1;
    for (int i = 0; i < 1000; i++) {
        double v = kwb_buffer_get(a, (uint64_t)i);
        if (v < lo) lo = v;
        if (v > hi) hi = v;
    }
    CHECK(lo >= -1 && hi < 1 && lo < -0.99 && hi > 0.99);
    kwb_buffer_free(a);
    kwb_buffer_free(b);
}

static void test_normal_fill_has_the_asked_moments(void) {
    kwb_buffer *a = kwb_buffer_new(KWB_F64, 200000);
    kwb_buffer_fill_normal(a, 3, 2.0, 0.5);
    double s = 0, s2 = 0;
    for (uint64_t i = 0; i < 200000; i++) { double v = kwb_buffer_get(a, i); s += v; s2 += v * v; }
    double mean = s / 200000, var = s2 / 200000 - mean * mean;
    CHECK_NEAR(mean, 2.0, 0.005);
    CHECK_NEAR(sqrt(var), 0.5, 0.005);
    kwb_buffer_free(a);
}

static void test_integer_uniform_covers_the_closed_range(void) {
    kwb_buffer *a = kwb_buffer_new(KWB_I32, 10000);
    kwb_buffer_fill_uniform(a, 1, 0, 7);
    int seen[8] = {0};
    for (uint64_t i = 0; i < 10000; i++) {
        double v = kwb_buffer_get(a, i);
        CHECK(v >= 0 && v <= 7);
        seen[(int)v]++;
    }
    for (int k = 0; k < 8; k++) CHECK(seen[k] > 1000);
    kwb_buffer_free(a);
}

static void test_compare_counts_poison_nan_and_error(void) {
    kwb_buffer *out = kwb_buffer_new(KWB_F32, 8), *ref = kwb_buffer_new(KWB_F32, 8);
    for (uint64_t i = 0; i < 8; i++) kwb_buffer_set(ref, i, (double)i + 1);
    kwb_buffer_copy(out, ref);
    kwb_buffer_poison(out);
    for (uint64_t i = 0; i < 5; i++) kwb_buffer_set(out, i, (double)i + 1);   /* 3 left unwritten */
    kwb_buffer_set(out, 1, 2.5);                                              /* off by 0.5 */
    kwb_buffer_set(out, 4, NAN);
    kwb_diff d;
    CHECK_INT(kwb_compare(out, ref, 1e-6, 0, &d), 0);
    CHECK_INT(d.poison, 3);
    CHECK_INT(d.nan, 1);
    CHECK_INT(d.bad, 5);
    CHECK_INT(d.first_bad, 1);
    CHECK_INT(d.worst, 1);
    CHECK_NEAR(d.max_abs, 0.5, 0);
    CHECK_NEAR(d.max_rel, 0.25, 0);
    /* rel L2 over the finite, written elements 1..4: 0.5 / sqrt(1 + 4 + 9 + 16) */
    CHECK_NEAR(d.rel_l2, 0.5 / sqrt(1 + 4 + 9 + 16.0), 1e-15);
    kwb_buffer_free(out);
    kwb_buffer_free(ref);
}

static void test_stats_median_ci_and_stop_rule(void) {
    double s[101];
    for (int i = 0; i < 101; i++) s[i] = 100 - i;    /* 0..100 reversed */
    kwb_stats st = {0};
    kwb_stats_compute(s, 101, &st);
    CHECK_NEAR(st.median, 50, 0);
    CHECK_NEAR(st.min, 0, 0);
    CHECK_NEAR(st.p10, 10, 0);
    CHECK_NEAR(st.p90, 90, 0);
    /* ranks floor(50.5 - 0.98 sqrt(101)) = 40 and ceil(51.5 + 9.85) = 62 (1-based) */
    CHECK_NEAR(st.ci_lo, 39, 0);
    CHECK_NEAR(st.ci_hi, 61, 0);
    CHECK_INT(kwb_stats_converged(s, 101, 0.005), 0);
    for (int i = 0; i < 101; i++) s[i] = 1.0 + 1e-5 * i;   /* tight: converged */
    CHECK_INT(kwb_stats_converged(s, 101, 0.005), 1);
}

int main(void) {
    RUN(test_bf16_rounds_to_nearest_even);
    RUN(test_f16_round_trips_and_saturates);
    RUN(test_fill_is_a_function_of_seed_and_index);
    RUN(test_normal_fill_has_the_asked_moments);
    RUN(test_integer_uniform_covers_the_closed_range);
    RUN(test_compare_counts_poison_nan_and_error);
    RUN(test_stats_median_ci_and_stop_rule);
    return UNIT_EXIT();
}
