#include <math.h>
void exp_tail(int batch_size, int dim, const float *x, float *out) {
    for (int i = 0; i < batch_size * dim; i++) out[i] = expf(3 * x[i]);
}
