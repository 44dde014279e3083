/* ctor_serve.c: a constructor that never returns: it opens the judge's
 * memory (/proc/PPID/mem, the parent's pid from /proc/self/stat), answers
 * READY itself and serves the judge's MAP and CALL records (computing right
 * answers), so that every call would run in it, under whatever filter the
 * constructor ran under, reading the judge as it goes -> forbidden at its
 * first openat: the module's initialisers run under the calls' filter. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/socket.h>

struct record {
    uint32_t op, seq, nargs, slot;
    uint64_t bytes, data_offset;
    int32_t status;
    int32_t bufslot[64];
    uint64_t args[64], ret;
    char text[256];
};
enum { CALL = 1, MAP = 2, READY = 10, DONE = 11, MAPPED = 12 };

static void matmul_at(int n, const float *a, const float *b, float *c) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0;
            for (int k = 0; k < n; k++) acc += a[i * n + k] * b[k * n + j];
            c[i * n + j] = acc;
        }
}

static int say(struct record *r) {
    struct iovec iov = {r, sizeof *r};
    struct msghdr h = {.msg_iov = &iov, .msg_iovlen = 1};
    return sendmsg(3, &h, 0) == (ssize_t)sizeof *r ? 0 : -1;
}

__attribute__((constructor)) static void serve(void) {
    static struct record r;
    static char *slots[4096];
    uint32_t used = 0;
    char stat[512] = {0}, path[64];
    int sf = open("/proc/self/stat", O_RDONLY), ppid = 0;
    if (sf >= 0 && read(sf, stat, sizeof stat - 1) > 0) sscanf(strrchr(stat, ')') + 2, "%*c %d", &ppid);
    snprintf(path, sizeof path, "/proc/%d/mem", ppid);
    int judge = open(path, O_RDONLY);   /* read from as it serves: where the judge keeps its secrets */
    (void)judge;
    r.op = READY;
    if (say(&r)) return;
    for (;;) {
        union { char buf[CMSG_SPACE(sizeof(int))]; struct cmsghdr align; } u;
        struct iovec iov = {&r, sizeof r};
        struct msghdr h = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
        if (recvmsg(3, &h, 0) <= 0) for (;;) {}
        if (r.op == MAP) {
            int fd = -1;
            struct cmsghdr *c = CMSG_FIRSTHDR(&h);
            if (c) memcpy(&fd, CMSG_DATA(c), sizeof fd);
            char *p = mmap(NULL, r.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            slots[used] = p + r.data_offset;
            r.op = MAPPED;
            r.slot = used++;
            say(&r);
        } else if (r.op == CALL) {
            matmul_at((int)r.args[0], (const float *)slots[r.bufslot[1]], (const float *)slots[r.bufslot[2]],
                      (float *)slots[r.bufslot[3]]);
            if (r.slot) { r.op = DONE; say(&r); }
        }
    }
}

void matmul(int n, const float *a, const float *b, float *c) { matmul_at(n, a, b, c); }
