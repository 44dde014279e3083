#define _GNU_SOURCE
/* kill_parent.c: tries to kill the process that judges it (its pid is n). */
#include <signal.h>
#include <unistd.h>
void add(int n, const float *a, float *c) {
    (void)a; (void)c;
    kill((pid_t)n, SIGKILL);
}
