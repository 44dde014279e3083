/* host_ffi.h: the libffi side of host calls, shared by the judge's calls
 * (host.c) and a sandbox's (sandbox.c) */
#ifndef KWB_HOST_FFI_H
#define KWB_HOST_FFI_H
#include <ffi.h>

#include "kwb.h"

/* The libffi type of a kernel's argument or return type (NULL for none). */
ffi_type *kwb_host_ffi_type(kwb_ctype t);
/* One call through a prepared cif; the return value, when ret is not
 * void, into *out (libffi widens integral returns to an ffi_arg). */
void kwb_host_ffi_call(ffi_cif *cif, void *fn, kwb_ctype ret, void **values, kwb_value *out);

#endif
