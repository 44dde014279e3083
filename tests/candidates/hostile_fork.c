/* hostile_fork.c: _Fork, sigqueue and pselect (on no deny list) to leave a
 * process behind -> forbidden by the allow-list, naming _Fork. */
extern int _Fork(void);
extern int sigqueue(int pid, int sig, long value);
extern int pselect(int n, void *r, void *w, void *e, const void *t, const void *m);

void matmul(int n, const float *a, const float *b, float *c) {
    if (n < 0 && _Fork() == 0) {
        sigqueue(1, 9, 0);
        pselect(0, 0, 0, 0, 0, 0);
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0;
            for (int k = 0; k < n; k++) acc += a[i * n + k] * b[k * n + j];
            c[i * n + j] = acc;
        }
}
