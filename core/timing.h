/* timing.h: the sampling loop shared by the backends */
#ifndef KWB_TIMING_H
#define KWB_TIMING_H
#include "kwb.h"

/* One measurement: run the thing `batch` times and store the elapsed seconds
 * of the whole batch in *seconds. Returns 0 or a negative kwb_status. */
typedef int (*kwb_sample_fn)(void *ctx, uint32_t batch, double *seconds);

/* Warm up, choose a batch so one sample lasts at least o->min_sample_s, then
 * sample until the stop rule holds or the cap is reached. Times in *st are
 * per call. */
int kwb_time_loop(kwb_sample_fn fn, void *ctx, const kwb_time_opts *o, kwb_stats *st);

#endif
