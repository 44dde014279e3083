/* judge_proc.c: opens its judge's /proc/PID/WHAT (cmdline or mem; PID is n
 * for the kernel, JUDGE for the constructor), from the constructor when
 * built with IN_CTOR, else from the kernel. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
#define STR2(x) #x
#define STR(x) STR2(x)
static void peek(int pid) {
    char path[64], buf[64];
    snprintf(path, sizeof path, "/proc/%d/" STR(WHAT), pid);
    int f = open(path, O_RDONLY);
    if (f >= 0 && read(f, buf, sizeof buf) < 0) buf[0] = 0;
}
#ifdef IN_CTOR
__attribute__((constructor)) static void early(void) { peek(JUDGE); }
#endif
void add(int n, const float *a, float *c) {
#ifndef IN_CTOR
    peek(n);
#endif
    for (int i = 0; i < 4; i++) c[i] = a[i] + 1;
}
