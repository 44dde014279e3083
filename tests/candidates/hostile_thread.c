/* hostile_thread.c: does the work on another thread, behind a macro
 * -> forbidden (other-streams). */
#include <pthread.h>
#define SPAWN pthread_##create

struct job { int n; const float *a, *b; float *c; };

static void *work(void *p) {
    struct job *j = p;
    int n = j->n;
    for (int i = 0; i < n; i++)
        for (int jj = 0; jj < n; jj++) {
            float acc = 0;
            for (int k = 0; k < n; k++) acc += j->a[i * n + k] * j->b[k * n + jj];
            j->c[i * n + jj] = acc;
        }
    return 0;
}

void matmul(int n, const float *a, const float *b, float *c) {
    struct job j = {n, a, b, c};
    pthread_t t;
    SPAWN(&t, 0, work, &j);
    work(&j);
}
