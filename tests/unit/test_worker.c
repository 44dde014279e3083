/* test_worker.c: worker processes through the C API, with /bin/sh as the
 * worker: frames, captured and capped output, the environment, death by a
 * signal, kill, and the scratch directory's life. */
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kwb.h"
#include "unit.h"

static kwb_worker *start_sh(const char *script, uint64_t cap) {
    const char *argv[] = {"sh", "-c", script, NULL};
    const char *env[] = {"PATH=/usr/bin:/bin", "HOME=%SCRATCH%", NULL};
    kwb_worker_opts o;
    kwb_worker_opts_default(&o);
    o.exe = "/bin/sh";
    o.argv = argv;
    o.env = env;
    o.output_cap = cap;
    kwb_worker *w = NULL;
    if (kwb_worker_start(&o, &w) != 0) printf("  start: %s\n", kwb_last_error());
    return w;
}

static void test_worker_frame_output_and_environment(void) {
    kwb_worker *w = start_sh("printf '\\000\\000\\000\\005hello' >&3; env | sort; pwd", 1 << 16);
    CHECK(w != NULL);
    uint32_t which = 9;
    char *msg = NULL;
    size_t len = 0;
    CHECK_INT(kwb_worker_wait(&w, 1, 5, &which, &msg, &len), KWB_WORKER_MESSAGE);
    CHECK_INT(which, 0);
    CHECK_INT(len, 5);
    CHECK_STR(msg, "hello");
    kwb_free(msg);
    CHECK_INT(kwb_worker_wait(&w, 1, 5, &which, &msg, &len), KWB_WORKER_EXITED);
    kwb_worker_state st;
    kwb_worker_status(w, &st);
    CHECK_INT(st.alive, 0);
    CHECK_INT(st.exit_code, 0);
    CHECK_INT(st.signal, 0);
    size_t n;
    uint64_t total;
    char *out = kwb_worker_take_output(w, &n, &total);
    char want[8192];
    snprintf(want, sizeof want, "HOME=%s\nPATH=/usr/bin:/bin\nPWD=%s\n%s\n", kwb_worker_scratch(w),
             kwb_worker_scratch(w), kwb_worker_scratch(w));
    CHECK_STR(out, want);
    CHECK_INT(total, strlen(want));
    free(out);
    kwb_worker_free(w);
}

static void test_worker_output_is_capped_but_counted(void) {
    kwb_worker *w = start_sh("head -c 1000000 /dev/zero | tr '\\0' y", 1000);
    CHECK(w != NULL);
    uint32_t which;
    char *msg;
    size_t len;
    CHECK_INT(kwb_worker_wait(&w, 1, 10, &which, &msg, &len), KWB_WORKER_EXITED);
    size_t n;
    uint64_t total;
    char *out = kwb_worker_take_output(w, &n, &total);
    CHECK_INT(n, 1000);
    CHECK_INT(total, 1000000);
    CHECK_INT(strspn(out, "y"), 1000);
    free(out);
    kwb_worker_free(w);
}

static void test_worker_death_by_signal_and_kill(void) {
    kwb_worker *w = start_sh("kill -SEGV $$", 1024);
    CHECK(w != NULL);
    uint32_t which;
    char *msg;
    size_t len;
    CHECK_INT(kwb_worker_wait(&w, 1, 5, &which, &msg, &len), KWB_WORKER_EXITED);
    kwb_worker_state st;
    kwb_worker_status(w, &st);
    CHECK_INT(st.signal, 11);
    CHECK_INT(st.killed, 0);
    CHECK(kwb_worker_send(w, "x", 1) != 0);
    kwb_worker_free(w);

    kwb_worker *h = start_sh("sleep 30", 1024);
    CHECK(h != NULL);
    CHECK_INT(kwb_worker_wait(&h, 1, 0.2, &which, &msg, &len), KWB_WORKER_TIMEOUT);
    kwb_worker_kill(h);
    kwb_worker_status(h, &st);
    CHECK_INT(st.alive, 0);
    CHECK_INT(st.signal, 9);
    CHECK_INT(st.killed, 1);
    kwb_worker_free(h);
}

static void test_worker_scratch_is_removed_with_the_worker(void) {
    kwb_worker *w = start_sh("echo data > file; mkdir -p d/e; echo more > d/e/f", 1024);
    CHECK(w != NULL);
    char path[4096];
    snprintf(path, sizeof path, "%s", kwb_worker_scratch(w));
    uint32_t which;
    char *msg;
    size_t len;
    CHECK_INT(kwb_worker_wait(&w, 1, 5, &which, &msg, &len), KWB_WORKER_EXITED);
    struct stat sb;
    char file[4200];
    snprintf(file, sizeof file, "%s/d/e/f", path);
    CHECK_INT(stat(file, &sb), 0);
    kwb_worker_free(w);
    CHECK(stat(path, &sb) != 0);
}

static void aged(const char *path) {   /* an hour untouched */
    struct timespec t[2] = {{time(NULL) - 3600, 0}, {time(NULL) - 3600, 0}};
    utimensat(AT_FDCWD, path, t, AT_SYMLINK_NOFOLLOW);
}

static int there(const char *dir, const char *name) {
    char p[4200];
    struct stat sb;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return lstat(p, &sb) == 0;
}

/* A stale scratch (no handle locks it, nobody works in it, an hour old) goes,
 * and the links inside it go as links: what they point at stays. A live
 * worker's scratch, a fresh one and another name stay. */
static void test_worker_sweep_removes_stale_scratch_and_follows_no_link(void) {
    char parent[] = "/tmp/kwb-sweep-XXXXXX", p[4200];
    CHECK(mkdtemp(parent) != NULL);
    snprintf(p, sizeof p, "%s/outside", parent);
    CHECK_INT(mkdir(p, 0755), 0);
    snprintf(p, sizeof p, "%s/outside/keep", parent);
    FILE *f = fopen(p, "w");
    CHECK(f != NULL);
    fclose(f);
    snprintf(p, sizeof p, "cd %s && mkdir -p kwb-worker-aaaaaa/d/e kwb-worker-bbbbbb kwb-worker-toolong && "
             "echo x > kwb-worker-aaaaaa/d/e/f && ln -s %s/outside kwb-worker-aaaaaa/ldir && "
             "ln -s %s/outside/keep kwb-worker-aaaaaa/d/lfile", parent, parent, parent);
    CHECK_INT(system(p), 0);
    const char *argv[] = {"sh", "-c", "sleep 5", NULL};
    const char *env[] = {"PATH=/usr/bin:/bin", NULL};
    kwb_worker_opts o;
    kwb_worker_opts_default(&o);
    o.exe = "/bin/sh";
    o.argv = argv;
    o.env = env;
    o.scratch_parent = parent;
    kwb_worker *w = NULL;
    CHECK_INT(kwb_worker_start(&o, &w), 0);
    char live[64];
    snprintf(live, sizeof live, "%s", strrchr(kwb_worker_scratch(w), '/') + 1);
    snprintf(p, sizeof p, "%s/kwb-worker-aaaaaa", parent); aged(p);
    snprintf(p, sizeof p, "%s/kwb-worker-toolong", parent); aged(p);
    aged(kwb_worker_scratch(w));
    CHECK_INT(kwb_worker_sweep(parent, 10), 1);
    CHECK(!there(parent, "kwb-worker-aaaaaa"));
    CHECK(there(parent, "outside/keep"));
    CHECK(there(parent, live));
    CHECK(there(parent, "kwb-worker-bbbbbb"));
    CHECK(there(parent, "kwb-worker-toolong"));
    kwb_worker_kill(w);
    CHECK(there(parent, live));
    CHECK_INT(kwb_worker_sweep(parent, 0), 1);   /* the fresh one, at no age */
    CHECK(!there(parent, "kwb-worker-bbbbbb"));
    CHECK(there(parent, live));
    kwb_worker_free(w);
    CHECK(!there(parent, live));
    snprintf(p, sizeof p, "rm -rf %s", parent);
    CHECK_INT(system(p), 0);
}

int main(void) {
    RUN(test_worker_frame_output_and_environment);
    RUN(test_worker_output_is_capped_but_counted);
    RUN(test_worker_death_by_signal_and_kill);
    RUN(test_worker_scratch_is_removed_with_the_worker);
    RUN(test_worker_sweep_removes_stale_scratch_and_follows_no_link);
    return UNIT_EXIT();
}
