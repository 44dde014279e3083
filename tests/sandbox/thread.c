/* thread.c: leaves a thread behind to write after the call returns. */
#include <pthread.h>
static void *later(void *p) { for (;;) ((volatile float *)p)[0] = 0; return 0; }
void add(int n, const float *a, float *c) {
    pthread_t t;
    for (int i = 0; i < n; i++) c[i] = a[i] + 1;
    pthread_create(&t, 0, later, c);
}
