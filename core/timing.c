/* timing.c: sampling statistics and the stop rule (docs/architecture.md, Conventions) */
#include <math.h>
#include <stdlib.h>
#include <time.h>

#include "kwb.h"
#include "timing.h"

double kwb_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void kwb_time_opts_default(kwb_time_opts *o) {
    *o = (kwb_time_opts){
        .warmup_s = 0.05, .warmup_min = 3, .min_samples = 10, .max_samples = 10000,
        .cap_s = 1.0, .target_ci = 0.005, .min_sample_s = 20e-6,
    };
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Linear interpolation between order statistics, q in [0, 1]. */
static double quantile(const double *s, uint32_t n, double q) {
    double pos = q * (n - 1);
    uint32_t i = (uint32_t)pos;
    if (i + 1 >= n) return s[n - 1];
    return s[i] + (pos - i) * (s[i + 1] - s[i]);
}

/* Distribution-free 95% confidence interval of the median: the order
 * statistics of ranks n/2 -+ 0.98 sqrt(n) (1.96 standard errors of a
 * binomial(n, 1/2) count, halved). */
static void median_ci(const double *s, uint32_t n, double *lo, double *hi) {
    double h = 0.98 * sqrt((double)n);
    long j = (long)floor(n / 2.0 - h), k = (long)ceil(1 + n / 2.0 + h);
    if (j < 1) j = 1;
    if (k > (long)n) k = (long)n;
    *lo = s[j - 1];
    *hi = s[k - 1];
}

int kwb_stats_converged(const double *sorted, uint32_t n, double rel) {
    if (n < 3) return 0;
    double lo, hi, med = quantile(sorted, n, 0.5);
    median_ci(sorted, n, &lo, &hi);
    return med - lo <= rel * med && hi - med <= rel * med;
}

void kwb_stats_compute(double *s, uint32_t n, kwb_stats *st) {
    uint32_t batch = st->batch, warmup = st->warmup;
    int capped = st->capped;
    *st = (kwb_stats){.n = n, .batch = batch, .warmup = warmup, .capped = capped};
    if (n == 0) return;
    qsort(s, n, sizeof *s, cmp_double);
    double sum = 0, sum2 = 0;
    for (uint32_t i = 0; i < n; i++) sum += s[i];
    st->mean = sum / n;
    for (uint32_t i = 0; i < n; i++) sum2 += (s[i] - st->mean) * (s[i] - st->mean);
    st->spread = n > 1 && st->mean > 0 ? sqrt(sum2 / (n - 1)) / st->mean : 0;
    st->min = s[0];
    st->max = s[n - 1];
    st->median = quantile(s, n, 0.5);
    st->p10 = quantile(s, n, 0.1);
    st->p90 = quantile(s, n, 0.9);
    median_ci(s, n, &st->ci_lo, &st->ci_hi);
}

int kwb_time_loop(kwb_sample_fn fn, void *ctx, const kwb_time_opts *o, kwb_stats *st) {
    kwb_time_opts def;
    if (!o) { kwb_time_opts_default(&def); o = &def; }
    /* warm-up: one call at a time, remembering the fastest */
    double t0 = kwb_now(), best = INFINITY, dt;
    uint32_t warm = 0;
    while (warm < o->warmup_min || kwb_now() - t0 < o->warmup_s) {
        int rc = fn(ctx, 1, &dt);
        if (rc) return rc;
        if (dt < best) best = dt;
        warm++;
        if (warm >= 1000000) break;
    }
    uint32_t batch = 1;
    if (best < o->min_sample_s) {
        double b = ceil(o->min_sample_s / (best > 1e-9 ? best : 1e-9));
        batch = b > 1e6 ? 1000000 : (uint32_t)b;
    }
    uint32_t cap_n = o->max_samples ? o->max_samples : 1;
    double *s = malloc(sizeof *s * cap_n), *sorted = malloc(sizeof *s * cap_n);
    if (!s || !sorted) { free(s); free(sorted); return KWB_ENOMEM; }
    uint32_t n = 0, next_check = o->min_samples;
    int capped = 0;
    double start = kwb_now();
    for (;;) {
        int rc = fn(ctx, batch, &dt);
        if (rc) { free(s); free(sorted); return rc; }
        s[n++] = dt / batch;
        if (n >= cap_n) { capped = 1; break; }
        if (kwb_now() - start >= o->cap_s && n >= o->min_samples) { capped = 1; break; }
        if (n >= next_check) {   /* sort a copy only now and then: checks cost O(n log n) */
            for (uint32_t i = 0; i < n; i++) sorted[i] = s[i];
            qsort(sorted, n, sizeof *sorted, cmp_double);
            if (kwb_stats_converged(sorted, n, o->target_ci)) break;
            next_check = n + (n / 10 > 1 ? n / 10 : 1);
        }
    }
    st->batch = batch;
    st->warmup = warm;
    st->capped = capped;
    kwb_stats_compute(s, n, st);
    free(s);
    free(sorted);
    return 0;
}
