/* rng.h: a counter-based generator: value i of stream `seed` is a pure
 * function of (seed, i), so fills are reproducible in any order, on any
 * thread, and on the device. */
#ifndef KWB_RNG_H
#define KWB_RNG_H
#include <stdint.h>

uint64_t kwb_rng_bits(uint64_t seed, uint64_t i);
double kwb_rng_u01(uint64_t seed, uint64_t i);     /* uniform in [0, 1) */
double kwb_rng_normal(uint64_t seed, uint64_t i);  /* standard normal */

#endif
