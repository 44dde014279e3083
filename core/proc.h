/* proc.h: run a program and capture what it prints */
#ifndef KWB_PROC_H
#define KWB_PROC_H
#include <stddef.h>

/* Run argv[0] (searched on PATH) with its stdout and stderr captured together
 * into *output (NUL-terminated, at most cap bytes kept, free with free()).
 * Returns the exit status (0..255), 128+signal if it was killed, or a negative
 * kwb_status if it could not be started. */
int kwb_proc_run(const char *const *argv, char **output, size_t cap);

#endif
