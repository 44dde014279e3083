#include <math.h>
void two_scales(int batch_size, int dim, const float *x, float *out0, float *out1) {
    for (int r = 0; r < batch_size; r++) {
        const float *xr = x + r * dim;
        double m = xr[0], s = 0;
        for (int i = 1; i < dim; i++) if (xr[i] > m) m = xr[i];
        for (int i = 0; i < dim; i++) s += exp(xr[i] - m);
        double ls = log(s);
        for (int i = 0; i < dim; i++) {
            out0[r * dim + i] = (float)(xr[i] - m - ls);
            out1[r * dim + i] = (float)(exp(xr[i] - m) / s);
        }
    }
}
