/* constructor.c: forks while its module loads, before any call. */
#include <unistd.h>
__attribute__((constructor)) static void early(void) {
    if (fork() == 0) for (;;) pause();
}
void add(int n, const float *a, float *c) {
    for (int i = 0; i < n; i++) c[i] = a[i] + 1;
}
