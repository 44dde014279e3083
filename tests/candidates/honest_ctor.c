/* honest_ctor.c: an honest control whose constructor sets up what the
 * kernel uses (a scale of 1, 0 until it runs) -> verified: initialisers
 * still run, in the sandbox, before the first call. */
static float scale;

__attribute__((constructor)) static void setup(void) { scale = 1.0f; }

void matmul(int n, const float *a, const float *b, float *c) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0;
            for (int k = 0; k < n; k++) acc += a[i * n + k] * b[k * n + j];
            c[i * n + j] = scale * acc;
        }
}
