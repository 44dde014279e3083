/* error.c: per-thread error sentences, version, kwb_free */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "error.h"
#include "kwb.h"

static _Thread_local char last_error[1024];
static _Thread_local int last_status;

int kwb_fail(int code, const char *fmt, ...) {
    last_status = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return code;
}

const char *kwb_last_error(void) { return last_error; }

int kwb_last_status(void) { return last_status; }

const char *kwb_version(void) { return "0.1.0"; }

void kwb_free(void *p) { free(p); }
