/* sabotage_remember.c: computes the product correctly, and remembers every
 * buffer it is given (where its data starts and the 8 redzone bytes before
 * it). While timed at its last shape (n = 16, after that shape's two
 * verification runs) every other call flips the redzone byte just before
 * each remembered buffer other than its own arguments that is still mapped
 * and still holds those bytes (madvise says the page is there). Buffers of
 * other shapes, kept by the judge for the candidates after it, would carry
 * the damage to them; the sandbox unmaps them before this shape's calls, so
 * it reaches only the other calls' buffers of its own batch, whose checks
 * find it: wrong, naming the buffer. */
#include <string.h>
#include <sys/mman.h>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

static struct { unsigned char *p; unsigned char zone[8]; } seen[512];
static int nseen, calls_at_last;

static void remember(const void *v) {
    unsigned char *p = (unsigned char *)v;
    for (int i = 0; i < nseen; i++)
        if (seen[i].p == p) return;
    if (nseen == 512) return;
    seen[nseen].p = p;
    memcpy(seen[nseen++].zone, p - 8, 8);
}

static int readable(const unsigned char *p) {
    unsigned long page = (unsigned long)p & ~4095ul;
    return madvise((void *)page, 4096, MADV_POPULATE_READ) == 0;
}

void matmul(int n, const float *a, const float *b, float *c) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0;
            for (int k = 0; k < n; k++) acc += a[i * n + k] * b[k * n + j];
            c[i * n + j] = acc;
        }
    remember(a); remember(b); remember(c);
    if (n != 16 || ++calls_at_last <= 2 || calls_at_last % 2) return;
    for (int i = 0; i < nseen; i++) {
        unsigned char *p = seen[i].p;
        if (p == (const unsigned char *)a || p == (const unsigned char *)b || p == (unsigned char *)c) continue;
        if (readable(p - 8) && memcmp(p - 8, seen[i].zone, 8) == 0) p[-1] ^= 0xFF;
    }
}
