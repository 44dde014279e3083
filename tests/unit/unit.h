/* unit.h: a minimal C test harness. A test is a void function; CHECK stops it
 * at the first failed check. main() lists the tests with RUN. Each prints
 * "ok name" or "FAIL name" (tests/run counts these lines). */
#ifndef KWB_UNIT_H
#define KWB_UNIT_H
#include <math.h>
#include <stdio.h>
#include <string.h>

static int unit_failed, unit_failures;

#define CHECK(c) do { if (!(c)) { \
    printf("  %s:%d: check failed: %s\n", __FILE__, __LINE__, #c); unit_failed = 1; return; } } while (0)
#define CHECK_INT(a, b) do { long long a_ = (long long)(a), b_ = (long long)(b); if (a_ != b_) { \
    printf("  %s:%d: %s == %lld, want %lld\n", __FILE__, __LINE__, #a, a_, b_); unit_failed = 1; return; } } while (0)
#define CHECK_NEAR(a, b, tol) do { double a_ = (a), b_ = (b); if (!(fabs(a_ - b_) <= (tol))) { \
    printf("  %s:%d: %s == %.17g, want %.17g (tol %g)\n", __FILE__, __LINE__, #a, a_, b_, (double)(tol)); \
    unit_failed = 1; return; } } while (0)
#define CHECK_STR(a, b) do { const char *a_ = (a), *b_ = (b); if (!a_ || strcmp(a_, b_) != 0) { \
    printf("  %s:%d: %s == \"%s\", want \"%s\"\n", __FILE__, __LINE__, #a, a_ ? a_ : "(null)", b_); \
    unit_failed = 1; return; } } while (0)
#define RUN(fn) do { unit_failed = 0; fn(); printf("%s %s\n", unit_failed ? "FAIL" : "ok", #fn); \
    unit_failures += unit_failed; } while (0)
#define UNIT_EXIT() (unit_failures ? 1 : 0)

#endif
