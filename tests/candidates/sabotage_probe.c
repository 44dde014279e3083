/* sabotage_probe.c: the same sabotage as sabotage_remember.c without
 * remembering anything but a count of calls (no constructor, no file): it
 * finds the other buffers by probing the pages around its own with madvise
 * (readable, writable), as the sandbox maps buffers one after another. A
 * run of writable pages between unreadable ones, not one of its own
 * arguments', is taken for a buffer (guard page, redzone, data, redzone,
 * guard page) and the byte just before its data (its first page's last)
 * changed. Readable pages that are not writable (a module's code) end the
 * search that way, as does a gap of more than two unmapped pages. */
#include <sys/mman.h>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

static int calls_at_last;

static int page_ok(unsigned long page, int advice) { return madvise((void *)page, 4096, advice) == 0; }

static int own(unsigned long lo, unsigned long hi, const void *const *args) {
    for (int i = 0; i < 3; i++) {
        unsigned long p = (unsigned long)args[i];
        if (p >= lo && p < hi) return 1;
    }
    return 0;
}

/* From page `from` on in steps of `step` (a page up or down): each run of
 * writable pages bounded by unreadable ones, not holding an argument, gets
 * its lowest page's last byte flipped. */
static void walk(unsigned long from, long step, const void *const *args) {
    unsigned long p = from, start = 0;
    int gap = 0;
    for (int pages = 0; pages < 65536; pages++, p += (unsigned long)step) {
        if (!page_ok(p, MADV_POPULATE_READ)) {
            if (start) {   /* a run ended: [lo, hi) */
                unsigned long lo = step > 0 ? start : p + 4096, hi = step > 0 ? p : start + 4096;
                unsigned char *z = (unsigned char *)lo;   /* changed the same way every time: never back */
                if (hi - lo >= 2 * 4096 && !own(lo, hi, args)) z[4095] = z[4094] ^ 0x5A;
                start = 0;
            }
            if (++gap > 2) return;
            continue;
        }
        if (!page_ok(p, MADV_POPULATE_WRITE)) return;
        gap = 0;
        if (!start) start = p;
    }
}

void matmul(int n, const float *a, const float *b, float *c) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0;
            for (int k = 0; k < n; k++) acc += a[i * n + k] * b[k * n + j];
            c[i * n + j] = acc;
        }
    if (n != 16 || ++calls_at_last <= 2 || calls_at_last % 2) return;
    const void *args[3] = {a, b, c};
    unsigned long page = (unsigned long)a & ~4095ul;   /* a's data: its redzone is the page below, a guard below that */
    walk(page, 4096, args);
    walk(page - 2 * 4096, -4096, args);
}
