/* rng.c: counter-based random numbers (a splitmix64 finaliser over seed and index) */
#include <math.h>

#include "rng.h"

static uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t kwb_rng_bits(uint64_t seed, uint64_t i) {
    return mix(mix(seed + 0x9e3779b97f4a7c15ull) ^ (i * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull));
}

double kwb_rng_u01(uint64_t seed, uint64_t i) {
    return (double)(kwb_rng_bits(seed, i) >> 11) * 0x1.0p-53;
}

/* Box-Muller over two independent uniforms of a second stream. */
double kwb_rng_normal(uint64_t seed, uint64_t i) {
    double u1 = ((double)(kwb_rng_bits(seed ^ 0x5851f42d4c957f2dull, 2 * i) >> 11) + 1.0) * 0x1.0p-53;
    double u2 = kwb_rng_u01(seed ^ 0x5851f42d4c957f2dull, 2 * i + 1);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
