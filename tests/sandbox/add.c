/* add.c: c[i] = a[i] + 1, the honest control. */
void add(int n, const float *a, float *c) {
    for (int i = 0; i < n; i++) c[i] = a[i] + 1;
}
