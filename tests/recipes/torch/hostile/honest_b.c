/* nn.LayerNorm(32) over each row, its statistics in one pass. */
#include <math.h>
void layernorm(int rows, const float *x, const float *w, const float *b, float *out) {
    for (int r = 0; r < rows; r++) {
        const float *xr = x + r * 32;
        double s = 0, s2 = 0;
        for (int i = 0; i < 32; i++) { s += xr[i]; s2 += (double)xr[i] * xr[i]; }
        double mean = s / 32, var = s2 / 32 - mean * mean;
        double inv = 1 / sqrt(var + 1e-5);
        for (int i = 0; i < 32; i++) out[r * 32 + i] = (float)((xr[i] - mean) * inv * w[i] + b[i]);
    }
}
