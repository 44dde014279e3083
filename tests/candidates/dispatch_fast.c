// dispatch_fast.c: the plain sum after a fixed wait of about 100k loop
// steps -> faster than dispatch_slow.c where n is large, slower where small.
// Like dispatch_slow.c it defines a function sum2 that is not static.
float sum2(float x, float y) { return x + y; }

void vecadd(int n, const float *a, const float *b, float *c) {
    volatile int k;
    for (k = 0; k < 100000; k++) {
    }
    for (int i = 0; i < n; i++) c[i] = sum2(a[i], b[i]);
}
