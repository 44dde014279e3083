/* Changes the first weight it is handed (found by the call's check). */
void layernorm(int rows, const float *x, const float *w, const float *b, float *out) {
    ((float *)w)[0] += 1;
}
