/* error.h: the per-thread error sentence behind kwb_last_error() */
#ifndef KWB_ERROR_H
#define KWB_ERROR_H

/* Record a sentence for kwb_last_error() and return code, so callers can
 * write `return kwb_fail(KWB_EIO, "cannot open %s", path);`. */
int kwb_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
