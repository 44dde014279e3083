/* say.c: writes to its stdout and stderr, then computes right. */
#include <unistd.h>
void add(int n, const float *a, float *c) {
    if (write(1, "sandbox-says-out\n", 17) < 0 || write(2, "sandbox-says-err\n", 17) < 0) c[0] = 0;
    for (int i = 0; i < n; i++) c[i] = a[i] + 1;
}
