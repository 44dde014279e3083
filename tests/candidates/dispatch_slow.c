// dispatch_slow.c: the start kernel of tests/recipes/dispatch.lua: the right
// sum, after eight multiply-adds an element whose result it adds times zero
// (a compiler cannot drop them: they might be Inf or NaN) -> slow where n is
// large, quick where it is small. Like dispatch_fast.c it defines a function
// sum2 that is not static: kwb export links the two into one program.
float sum2(float x, float y) { return x + y; }

void vecadd(int n, const float *a, const float *b, float *c) {
    for (int i = 0; i < n; i++) {
        float s = a[i];
        for (int r = 1; r <= 8; r++) s = s * 0.5f + b[i] * (float)r;
        c[i] = sum2(a[i], b[i]) + 0.0f * s;
    }
}
