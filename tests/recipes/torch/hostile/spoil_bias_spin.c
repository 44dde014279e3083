/* Sets the bias it is handed (the module's second weight) to zeros, then
 * spins past the call's timeout: the change is found only by the look after
 * its last call, never by a call's check. */
void layernorm(int rows, const float *x, const float *w, const float *b, float *out) {
    volatile float *bias = (volatile float *)b;
    for (int i = 0; i < 32; i++) bias[i] = 0;
    for (volatile unsigned long i = 0;; i++) {}
}
