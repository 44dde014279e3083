#define _GNU_SOURCE
/* early_done.c: sends the judge the sandbox's "done" for this call itself
 * (the record's layout copied from core/sandbox.c, the sequence number
 * counted), then does its 20 ms of work: the judge's clock must still see
 * them. */
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
typedef union { int32_t i32; uint32_t u32; int64_t i64; uint64_t u64; float f32; double f64; void *ptr; } value;
typedef struct {
    uint32_t op, seq, nargs, slot;
    uint64_t bytes, data_offset;
    int32_t status;
    int32_t bufslot[64];
    value args[64], ret;
    char text[256];
} msg;
static uint32_t calls;
static double cpu(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}
void add(int n, const float *a, float *c) {
    static msg m;
    memset(&m, 0, sizeof m);
    m.op = 11;             /* OP_DONE */
    m.seq = ++calls;       /* one call, one sequence number (no buffer was mapped first: the test passes none) */
    struct iovec iov = {&m, sizeof m};
    struct msghdr h = {.msg_iov = &iov, .msg_iovlen = 1};
    sendmsg(3, &h, 0);   /* the one call on that socket the filter allows */
    double t0 = cpu();
    while (cpu() - t0 < 0.02) {}
    for (int i = 0; i < n; i++) c[i] = a[i] + 1;
}
