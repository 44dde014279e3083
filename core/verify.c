/* verify.c: compare a candidate's output against a reference */
#include <math.h>

#include "error.h"
#include "kwb.h"

int kwb_compare(const kwb_buffer *out, const kwb_buffer *ref, double atol, double rtol,
                kwb_diff *d) {
    uint64_t n = kwb_buffer_len(out);
    if (kwb_buffer_len(ref) != n)
        return kwb_fail(KWB_EINVAL, "compare needs equal lengths (out has %llu, ref has %llu)",
                        (unsigned long long)n, (unsigned long long)kwb_buffer_len(ref));
    *d = (kwb_diff){.n = n, .first_bad = -1, .worst = -1};
    double sum_d2 = 0, sum_r2 = 0, sum_r = 0;
    for (uint64_t i = 0; i < n; i++) {
        double r = kwb_buffer_get(ref, i);
        int bad = 0;
        if (!isfinite(r)) d->ref_nonfinite++;
        else sum_r += r;
        if (kwb_buffer_is_poison(out, i) && kwb_dtype_is_float(kwb_buffer_dtype(out))) {
            d->poison++;
            bad = 1;
        } else {
            if (kwb_buffer_is_poison(out, i)) d->poison++;
            double o = kwb_buffer_get(out, i);
            if (isnan(o)) { d->nan++; bad = 1; }
            else if (isinf(o)) { d->inf++; bad = 1; }
            else if (isfinite(r)) {
                double e = fabs(o - r);
                if (d->worst < 0 || e > d->max_abs) {
                    d->max_abs = e;
                    d->worst = (int64_t)i;
                }
                if (r != 0 && e / fabs(r) > d->max_rel) d->max_rel = e / fabs(r);
                sum_d2 += e * e;
                sum_r2 += r * r;
                if (!(e <= atol + rtol * fabs(r))) bad = 1;
            }
        }
        if (bad) {
            d->bad++;
            if (d->first_bad < 0) d->first_bad = (int64_t)i;
        }
    }
    d->rel_l2 = sum_r2 > 0 ? sqrt(sum_d2 / sum_r2) : sqrt(sum_d2);
    if (n > d->ref_nonfinite) d->ref_mean = sum_r / (double)(n - d->ref_nonfinite);
    return 0;
}
