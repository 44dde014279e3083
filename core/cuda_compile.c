/* cuda_compile.c: CUDA candidates to machine code. NVRTC for device-only
 * sources (in-process, to a cubin), nvcc for whole .cu modules with a host
 * launcher (to a shared object). Both are content-addressed in a build
 * directory, report each kernel's resources from ptxas, and compile several
 * candidates at once on threads. */
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cuda_api.h"
#include "cuda_int.h"
#include "error.h"
#include "kwb.h"
#include "proc.h"
#include "util.h"

/* ---- resource reports -------------------------------------------------- */

/* Threads a block can have with r registers a thread: registers are given to
 * warps in units of 256 out of 65536 a block, and a block has at most 1024
 * threads. */
static int32_t threads_for_regs(int32_t r) {
    if (r <= 0) return 1024;
    int32_t per_warp = (r * 32 + 255) / 256 * 256;
    int32_t warps = 65536 / per_warp;
    return warps * 32 > 1024 ? 1024 : warps * 32;
}

/* Parse ptxas -v output (as NVRTC and nvcc print it) into kernel entries. */
static int parse_resources(const char *log, kwb_cuda_kernel_info **out, uint32_t *n) {
    *out = NULL;
    *n = 0;
    uint32_t cap = 0;
    kwb_cuda_kernel_info *k = NULL, *cur = NULL;
    const char *p = log;
    while (p && *p) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        char line[1024];
        snprintf(line, sizeof line, "%.*s", (int)(len < sizeof line - 1 ? len : sizeof line - 1), p);
        char *q;
        if ((q = strstr(line, "Compiling entry function '"))) {
            q += strlen("Compiling entry function '");
            char *end = strchr(q, '\'');
            if (end) {
                if (*n == cap) {
                    cap = cap ? cap * 2 : 4;
                    kwb_cuda_kernel_info *nk = realloc(k, sizeof *k * cap);
                    if (!nk) { free(k); return kwb_fail(KWB_ENOMEM, "out of memory"); }
                    k = nk;
                }
                cur = &k[(*n)++];
                memset(cur, 0, sizeof *cur);
                snprintf(cur->name, sizeof cur->name, "%.*s", (int)(end - q), q);
                cur->max_threads = 1024;
            }
        } else if (cur && (q = strstr(line, "bytes stack frame"))) {
            int st = 0, ss = 0, sl = 0;
            const char *b = strchr(line, '.');
            if (b && sscanf(b + 1, " %d bytes stack frame, %d bytes spill stores, %d bytes spill loads",
                            &st, &ss, &sl) == 3) {
                cur->stack = st;
                cur->spill_stores = ss;
                cur->spill_loads = sl;
            }
        } else if (cur && (q = strstr(line, "Used "))) {
            int r = 0;
            if (sscanf(q, "Used %d registers", &r) == 1) {
                cur->registers = r;
                cur->max_threads = threads_for_regs(r);
            }
            char *sm = strstr(q, " bytes smem");
            if (sm) {
                while (sm > q && isdigit((unsigned char)sm[-1])) sm--;
                cur->static_smem = atoi(sm);
            }
        }
        p = e ? e + 1 : NULL;
    }
    *out = k;
    return 0;
}

/* ---- files ------------------------------------------------------------- */

/* Write atomically: a temporary name, then rename, so parallel builds of the
 * same hash never see half a file. */
static int write_file(const char *path, const void *data, size_t len) {
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.%d.%lu.tmp", path, (int)getpid(), (unsigned long)pthread_self());
    FILE *f = fopen(tmp, "wb");
    if (!f) return kwb_fail(KWB_EIO, "cannot write %s: %s", tmp, strerror(errno));
    size_t w = fwrite(data, 1, len, f);
    if (fclose(f) != 0 || w != len) { unlink(tmp); return kwb_fail(KWB_EIO, "cannot write %s", tmp); }
    if (rename(tmp, path) != 0) { unlink(tmp); return kwb_fail(KWB_EIO, "cannot rename %s: %s", tmp, strerror(errno)); }
    return 0;
}

static size_t strv_len(const char *const *v) {
    size_t n = 0;
    while (v && v[n]) n++;
    return n;
}

int kwb_cuda_arch_valid(const char *arch) {
    if (!arch || strncmp(arch, "sm_", 3) != 0) return 0;
    const char *p = arch + 3;
    int digits = 0;
    while (isdigit((unsigned char)*p)) { p++; digits++; }
    if (digits < 2 || digits > 3) return 0;
    if (*p == 'a' || *p == 'f') p++;
    return *p == 0;
}

/* The arch to build for: the named one, else the current device's. */
static int resolve_arch(const char *want, char *arch, size_t len) {
    if (want && *want) {
        if (!kwb_cuda_arch_valid(want))
            return kwb_fail(KWB_EINVAL, "unknown CUDA arch '%s' (expected sm_80, sm_89, sm_90, sm_90a, sm_100a, ...)", want);
        snprintf(arch, len, "%s", want);
        return 0;
    }
    kwb_cuda_device_info d;
    if (kwb_cuda_device_info_get(0, &d) != 0) {
        char why[512];
        snprintf(why, sizeof why, "%s", kwb_last_error());
        return kwb_fail(KWB_ENOARCH, "no arch given and no CUDA device to take it from (%s)", why);
    }
    snprintf(arch, len, "sm_%d%d", d.cc_major, d.cc_minor);
    return 0;
}

static char *first_error_line(const char *log) {
    const char *p = log ? strstr(log, "error") : NULL;
    if (!p) return strdup("see the log");
    const char *s = p;
    while (s > log && s[-1] != '\n') s--;
    const char *e = strchr(p, '\n');
    size_t n = e ? (size_t)(e - s) : strlen(s);
    if (n > 300) n = 300;
    char *r = malloc(n + 1);
    if (r) { memcpy(r, s, n); r[n] = 0; }
    return r;
}

static kwb_cuda_module *module_new(const char *hash, const char *arch, int kind) {
    kwb_cuda_module *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    memcpy(m->hash, hash, 65);
    snprintf(m->arch, sizeof m->arch, "%s", arch);
    m->kind = kind;
    return m;
}

void kwb_cuda_module_free(kwb_cuda_module *m) {
    if (!m) return;
    kwb_cuda_module_unload(m);
    if (m->so) dlclose(m->so);
    free(m->image);
    free(m->ptx);
    free(m->log);
    free(m->path);
    free(m->kernels);
    free(m);
}

/* ---- NVRTC ------------------------------------------------------------- */

static void add_opt(const char ***v, size_t *n, size_t *cap, const char *s) {
    if (*n + 1 >= *cap) {
        *cap = *cap ? *cap * 2 : 32;
        const char **nv = realloc(*v, sizeof **v * *cap);
        if (!nv) return;
        *v = nv;
    }
    (*v)[(*n)++] = s;
}

/* Add the headers that text includes ("x" or <x>) and that live in one of
 * the include directories, recursively, so an edited header under kernels/
 * changes the key. Headers found nowhere there (the CUDA toolkit's) are
 * covered by the compiler's version. */
static void key_headers(kwb_strbuf *key, const char *text, const char *const *dirs, int depth,
                        char seen[][512], int *nseen) {
    if (depth > 8) return;
    for (const char *p = text; (p = strstr(p, "#include")); p += 8) {
        const char *q = p + 8;
        while (*q == ' ' || *q == '\t') q++;
        char close = *q == '"' ? '"' : *q == '<' ? '>' : 0;
        if (!close) continue;
        const char *e = strchr(q + 1, close);
        const char *nl = strchr(q + 1, '\n');
        if (!e || (nl && nl < e) || e - q - 1 >= 256) continue;
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(e - q - 1), q + 1);
        for (size_t i = 0; i < strv_len(dirs); i++) {
            char path[512];
            if (snprintf(path, sizeof path, "%s/%s", dirs[i], name) >= (int)sizeof path) continue;
            char *content = kwb_read_file(path, NULL);
            if (!content) continue;
            int dup = 0;
            for (int k = 0; k < *nseen; k++) dup |= strcmp(seen[k], path) == 0;
            if (!dup && *nseen < 64) {
                snprintf(seen[(*nseen)++], 512, "%s", path);
                kwb_strbuf_addf(key, "header=%s\n", path);
                kwb_strbuf_add(key, content, strlen(content));
                key_headers(key, content, dirs, depth + 1, seen, nseen);
            }
            free(content);
            break;
        }
    }
}

/* Key text common to both compilers: everything that determines the output. */
static void key_common(kwb_strbuf *key, const kwb_cuda_build *b, const char *arch) {
    kwb_strbuf_addf(key, "arch=%s\nlineinfo=%d\n", arch, b->lineinfo);
    for (size_t i = 0; i < strv_len(b->flags); i++) kwb_strbuf_addf(key, "flag=%s\n", b->flags[i]);
    for (size_t i = 0; i < strv_len(b->defines); i++) kwb_strbuf_addf(key, "define=%s\n", b->defines[i]);
    for (size_t i = 0; i < strv_len(b->include_dirs); i++) kwb_strbuf_addf(key, "include=%s\n", b->include_dirs[i]);
    kwb_strbuf_addf(key, "source=%s\n", b->name ? b->name : "kernel.cu");
    kwb_strbuf_add(key, b->source, strlen(b->source));
    char (*seen)[512] = malloc(64 * 512);
    int nseen = 0;
    if (seen) key_headers(key, b->source, b->include_dirs, 0, seen, &nseen);
    else key->oom = 1;
    free(seen);
}

static int load_cached(kwb_cuda_module *m, const char *dir) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s.cubin", dir, m->hash);
    size_t len = 0;
    char *cubin = kwb_read_file(path, &len);
    if (!cubin) return -1;
    snprintf(path, sizeof path, "%s/%s.log", dir, m->hash);
    char *log = kwb_read_file(path, NULL);
    snprintf(path, sizeof path, "%s/%s.ptx", dir, m->hash);
    char *ptx = kwb_read_file(path, NULL);
    if (!log || !ptx) { free(cubin); free(log); free(ptx); return -1; }
    m->image = cubin;
    m->image_len = len;
    m->log = log;
    m->ptx = ptx;
    m->cached = 1;
    return 0;
}

int kwb_cuda_compile(const kwb_cuda_build *b, kwb_cuda_module **out, char **log) {
    *out = NULL;
    if (log) *log = NULL;
    if (!b->source) return kwb_fail(KWB_EINVAL, "CUDA compile needs a source");
    const kwb_nvrtc_api *nv = kwb_nvrtc();
    if (!nv) return KWB_EIO;
    char arch[32];
    int rc = resolve_arch(b->arch, arch, sizeof arch);
    if (rc) return rc;
    const char *dir = b->build_dir ? b->build_dir : "cache/build/cuda";
    const char *name = b->name ? b->name : "kernel.cu";

    kwb_strbuf key = {0};
    kwb_strbuf_addf(&key, "kwb-nvrtc-1\nnvrtc=%d.%d\n", nv->major, nv->minor);
    key_common(&key, b, arch);
    if (key.oom) { free(key.s); return kwb_fail(KWB_ENOMEM, "out of memory"); }
    char hash[65];
    rc = kwb_sha256_hex(key.s, key.len, hash);
    free(key.s);
    if (rc) return rc;
    kwb_cuda_module *m = module_new(hash, arch, KWB_CUDA_NVRTC);
    if (!m) return kwb_fail(KWB_ENOMEM, "out of memory");

    if (load_cached(m, dir) != 0) {
        /* options: arch, line info, ptxas's resource report, includes, defines, flags */
        const char **opt = NULL;
        size_t nopt = 0, cap = 0;
        char archopt[48], cudainc[600];
        snprintf(archopt, sizeof archopt, "-arch=%s", arch);
        snprintf(cudainc, sizeof cudainc, "-I%s/include", kwb_cuda_home());
        add_opt(&opt, &nopt, &cap, archopt);
        if (b->lineinfo) add_opt(&opt, &nopt, &cap, "-lineinfo");
        add_opt(&opt, &nopt, &cap, "--ptxas-options=-v");
        add_opt(&opt, &nopt, &cap, "-std=c++17");
        char **owned = calloc(strv_len(b->include_dirs) + strv_len(b->defines) + 1, sizeof *owned);
        size_t nowned = 0;
        for (size_t i = 0; owned && i < strv_len(b->include_dirs); i++) {
            size_t l = strlen(b->include_dirs[i]) + 3;
            owned[nowned] = malloc(l);
            if (owned[nowned]) { snprintf(owned[nowned], l, "-I%s", b->include_dirs[i]); add_opt(&opt, &nopt, &cap, owned[nowned]); }
            nowned++;
        }
        add_opt(&opt, &nopt, &cap, cudainc);
        for (size_t i = 0; owned && i < strv_len(b->defines); i++) {
            size_t l = strlen(b->defines[i]) + 3;
            owned[nowned] = malloc(l);
            if (owned[nowned]) { snprintf(owned[nowned], l, "-D%s", b->defines[i]); add_opt(&opt, &nopt, &cap, owned[nowned]); }
            nowned++;
        }
        for (size_t i = 0; i < strv_len(b->flags); i++) add_opt(&opt, &nopt, &cap, b->flags[i]);

        nvrtcProgram prog = NULL;
        int r = opt && owned ? nv->CreateProgram(&prog, b->source, name, 0, NULL, NULL) : 1;
        int crc = r == 0 ? nv->CompileProgram(prog, (int)nopt, opt) : r;
        for (size_t i = 0; i < nowned; i++) free(owned[i]);
        free(owned);
        free(opt);
        if (r != 0) {
            kwb_cuda_module_free(m);
            return kwb_fail(KWB_ENOMEM, "NVRTC could not create a program for %s", name);
        }
        size_t loglen = 0;
        nv->GetProgramLogSize(prog, &loglen);
        char *plog = malloc(loglen + 1);
        if (plog) { plog[0] = 0; nv->GetProgramLog(prog, plog); plog[loglen] = 0; }
        if (crc != 0) {
            char *first = first_error_line(plog);
            kwb_fail(KWB_ECOMPILE, "NVRTC rejected %s: %s", name, first ? first : nv->GetErrorString(crc));
            free(first);
            nv->DestroyProgram(&prog);
            kwb_cuda_module_free(m);
            if (log) *log = plog;
            else free(plog);
            return KWB_ECOMPILE;
        }
        size_t cl = 0, pl = 0;
        nv->GetCUBINSize(prog, &cl);
        nv->GetPTXSize(prog, &pl);
        m->image = malloc(cl ? cl : 1);
        m->ptx = malloc(pl + 1);
        if (!m->image || !m->ptx || !plog) {
            free(plog);
            nv->DestroyProgram(&prog);
            kwb_cuda_module_free(m);
            return kwb_fail(KWB_ENOMEM, "out of memory");
        }
        nv->GetCUBIN(prog, m->image);
        nv->GetPTX(prog, m->ptx);
        m->ptx[pl] = 0;
        m->image_len = cl;
        m->log = plog;
        nv->DestroyProgram(&prog);
        if (kwb_mkdirs(dir) != 0) {
            kwb_cuda_module_free(m);
            return kwb_fail(KWB_EIO, "cannot create %s: %s", dir, strerror(errno));
        }
        char path[4200];
        snprintf(path, sizeof path, "%s/%s.log", dir, hash);
        rc = write_file(path, m->log, strlen(m->log));
        snprintf(path, sizeof path, "%s/%s.ptx", dir, hash);
        if (!rc) rc = write_file(path, m->ptx, strlen(m->ptx));
        snprintf(path, sizeof path, "%s/%s.cubin", dir, hash);   /* last: it marks the entry complete */
        if (!rc) rc = write_file(path, m->image, m->image_len);
        if (rc) { kwb_cuda_module_free(m); return rc; }
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/%s.cubin", dir, hash);
    m->path = strdup(path);
    rc = parse_resources(m->log, &m->kernels, &m->nkernels);
    if (rc) { kwb_cuda_module_free(m); return rc; }
    *out = m;
    return 0;
}

/* ---- nvcc -------------------------------------------------------------- */

static pthread_mutex_t nvcc_lock = PTHREAD_MUTEX_INITIALIZER;
static char *nvcc_version;   /* kept for the life of the process */

const char *kwb_cuda_nvcc_path(char *buf, size_t len) {
    snprintf(buf, len, "%s/bin/nvcc", kwb_cuda_home());
    if (access(buf, X_OK) == 0) return buf;
    snprintf(buf, len, "nvcc");
    return buf;
}

static int nvcc_identity(const char **out) {
    pthread_mutex_lock(&nvcc_lock);
    if (!nvcc_version) {
        char nvcc[600];
        const char *argv[] = {kwb_cuda_nvcc_path(nvcc, sizeof nvcc), "--version", NULL};
        char *v = NULL;
        int rc = kwb_proc_run(argv, &v, 1 << 16);
        if (rc != 0) {
            free(v);
            pthread_mutex_unlock(&nvcc_lock);
            return kwb_fail(KWB_ENONVCC, "no nvcc: %s --version failed (set CUDA_HOME)", nvcc);
        }
        nvcc_version = v;
    }
    *out = nvcc_version;
    pthread_mutex_unlock(&nvcc_lock);
    return 0;
}

int kwb_cuda_nvcc(const kwb_cuda_build *b, kwb_cuda_module **out, char **log) {
    *out = NULL;
    if (log) *log = NULL;
    if (!b->source) return kwb_fail(KWB_EINVAL, "nvcc compile needs a source");
    const char *ident = NULL;
    int rc = nvcc_identity(&ident);
    if (rc) return rc;
    char arch[32];
    rc = resolve_arch(b->arch, arch, sizeof arch);
    if (rc) return rc;
    const char *dir = b->build_dir ? b->build_dir : "cache/build/cuda";
    kwb_strbuf key = {0};
    kwb_strbuf_addf(&key, "kwb-nvcc-1\n%s\n", ident);
    key_common(&key, b, arch);
    if (key.oom) { free(key.s); return kwb_fail(KWB_ENOMEM, "out of memory"); }
    char hash[65];
    rc = kwb_sha256_hex(key.s, key.len, hash);
    free(key.s);
    if (rc) return rc;
    if (kwb_mkdirs(dir) != 0) return kwb_fail(KWB_EIO, "cannot create %s: %s", dir, strerror(errno));
    kwb_cuda_module *m = module_new(hash, arch, KWB_CUDA_NVCC);
    if (!m) return kwb_fail(KWB_ENOMEM, "out of memory");
    char so[4200], logpath[4200], src[4200];
    snprintf(so, sizeof so, "%s/%s.so", dir, hash);
    snprintf(logpath, sizeof logpath, "%s/%s.nvcc.log", dir, hash);
    snprintf(src, sizeof src, "%s/%s.cu", dir, hash);
    char *cached_log = access(so, R_OK) == 0 ? kwb_read_file(logpath, NULL) : NULL;
    if (cached_log) {
        m->log = cached_log;
        m->cached = 1;
    } else {
        rc = write_file(src, b->source, strlen(b->source));
        if (rc) { kwb_cuda_module_free(m); return rc; }
        /* sm_90a and friends need the -gencode form (the -arch shorthand also
         * runs a plain pass that rejects their instructions) */
        char gencode[96], tmp[4300], nvcc[600];
        snprintf(gencode, sizeof gencode, "-gencode=arch=compute_%s,code=%s", arch + 3, arch);
        snprintf(tmp, sizeof tmp, "%s.%d.%lu.tmp", so, (int)getpid(), (unsigned long)pthread_self());
        const char **argv = NULL;
        size_t n = 0, cap = 0;
        add_opt(&argv, &n, &cap, kwb_cuda_nvcc_path(nvcc, sizeof nvcc));
        add_opt(&argv, &n, &cap, "-shared");
        add_opt(&argv, &n, &cap, "-Xcompiler=-fPIC");
        add_opt(&argv, &n, &cap, "-O3");
        add_opt(&argv, &n, &cap, "-std=c++17");
        add_opt(&argv, &n, &cap, gencode);
        add_opt(&argv, &n, &cap, "-Xptxas=-v");
        if (b->lineinfo) add_opt(&argv, &n, &cap, "-lineinfo");
        kwb_strbuf opts = {0};   /* -I and -D options, NUL-separated */
        for (size_t i = 0; i < strv_len(b->include_dirs); i++) { kwb_strbuf_addf(&opts, "-I%s", b->include_dirs[i]); kwb_strbuf_add(&opts, "", 1); }
        for (size_t i = 0; i < strv_len(b->defines); i++) { kwb_strbuf_addf(&opts, "-D%s", b->defines[i]); kwb_strbuf_add(&opts, "", 1); }
        for (size_t off = 0; opts.s && off < opts.len; off += strlen(opts.s + off) + 1) add_opt(&argv, &n, &cap, opts.s + off);
        for (size_t i = 0; i < strv_len(b->flags); i++) add_opt(&argv, &n, &cap, b->flags[i]);
        add_opt(&argv, &n, &cap, "-o");
        add_opt(&argv, &n, &cap, tmp);
        add_opt(&argv, &n, &cap, src);
        add_opt(&argv, &n, &cap, NULL);
        char *output = NULL;
        rc = argv && !opts.oom ? kwb_proc_run(argv, &output, 1 << 20) : kwb_fail(KWB_ENOMEM, "out of memory");
        free(argv);
        free(opts.s);
        if (rc != 0) {
            if (rc > 0) {
                char *first = first_error_line(output);
                kwb_fail(KWB_ECOMPILE, "nvcc rejected %s: %s", b->name ? b->name : "kernel.cu", first ? first : "see the log");
                free(first);
                rc = KWB_ECOMPILE;
            }
            unlink(tmp);
            if (log) *log = output;
            else free(output);
            kwb_cuda_module_free(m);
            return rc;
        }
        m->log = output ? output : strdup("");
        rc = write_file(logpath, m->log, strlen(m->log));
        if (!rc && rename(tmp, so) != 0) rc = kwb_fail(KWB_EIO, "cannot rename %s: %s", tmp, strerror(errno));
        if (rc) { unlink(tmp); kwb_cuda_module_free(m); return rc; }
    }
    m->path = strdup(so);
    m->so = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    if (!m->so) {
        rc = kwb_fail(KWB_EIO, "cannot load %s: %s", so, dlerror());
        kwb_cuda_module_free(m);
        return rc;
    }
    rc = parse_resources(m->log, &m->kernels, &m->nkernels);
    if (rc) { kwb_cuda_module_free(m); return rc; }
    *out = m;
    return 0;
}

/* ---- several at once ---------------------------------------------------- */

typedef struct {
    const kwb_cuda_build *builds;
    uint32_t n;
    atomic_uint next;
    kwb_cuda_module **mods;
    int *rcs;
    char **msgs, **logs;
} many_ctx;

static void *many_worker(void *p) {
    many_ctx *c = p;
    for (;;) {
        uint32_t i = atomic_fetch_add(&c->next, 1);
        if (i >= c->n) break;
        const kwb_cuda_build *b = &c->builds[i];
        c->rcs[i] = b->nvcc ? kwb_cuda_nvcc(b, &c->mods[i], &c->logs[i]) : kwb_cuda_compile(b, &c->mods[i], &c->logs[i]);
        c->msgs[i] = c->rcs[i] ? strdup(kwb_last_error()) : NULL;   /* errors are per thread */
    }
    return NULL;
}

int kwb_cuda_compile_many(const kwb_cuda_build *builds, uint32_t n, uint32_t threads,
                          kwb_cuda_module **mods, int *rcs, char **msgs, char **logs) {
    int need_nvrtc = 0;
    for (uint32_t i = 0; i < n; i++) need_nvrtc |= !builds[i].nvcc;
    if (need_nvrtc && !kwb_nvrtc()) return KWB_EIO;
    many_ctx c = {.builds = builds, .n = n, .mods = mods, .rcs = rcs, .msgs = msgs, .logs = logs};
    atomic_init(&c.next, 0);
    for (uint32_t i = 0; i < n; i++) { mods[i] = NULL; msgs[i] = logs[i] = NULL; rcs[i] = 0; }
    if (threads < 1) threads = 1;
    if (threads > n) threads = n;
    if (threads > 64) threads = 64;
    pthread_t tid[64];
    uint32_t started = 0;
    for (uint32_t t = 1; t < threads; t++) {
        if (pthread_create(&tid[started], NULL, many_worker, &c) != 0) break;
        started++;
    }
    many_worker(&c);
    for (uint32_t t = 0; t < started; t++) pthread_join(tid[t], NULL);
    return 0;
}

/* ---- in the background ------------------------------------------------- */

/* A deep copy of builds, owned by one background job. */
typedef struct {
    kwb_cuda_build *builds;
    uint32_t n, threads;
} prebuild_job;

static char **strv_dup(const char *const *v) {
    size_t n = strv_len(v);
    char **out = calloc(n + 1, sizeof *out);
    if (!out) return NULL;
    for (size_t i = 0; i < n; i++) out[i] = strdup(v[i]);
    return out;
}

static void strv_free(char **v) {
    if (!v) return;
    for (size_t i = 0; v[i]; i++) free(v[i]);
    free(v);
}

static void job_free(prebuild_job *j) {
    for (uint32_t i = 0; i < j->n; i++) {
        kwb_cuda_build *b = &j->builds[i];
        free((char *)b->source); free((char *)b->name); free((char *)b->arch); free((char *)b->build_dir);
        strv_free((char **)b->defines); strv_free((char **)b->flags); strv_free((char **)b->include_dirs);
    }
    free(j->builds);
    free(j);
}

static atomic_int prebuilds_running;

static void *prebuild_main(void *p) {
    prebuild_job *j = p;
    kwb_cuda_module **mods = calloc(j->n, sizeof *mods);
    int *rcs = calloc(j->n, sizeof *rcs);
    char **msgs = calloc(j->n, sizeof *msgs), **logs = calloc(j->n, sizeof *logs);
    if (mods && rcs && msgs && logs && kwb_cuda_compile_many(j->builds, j->n, j->threads, mods, rcs, msgs, logs) == 0)
        for (uint32_t i = 0; i < j->n; i++) {   /* what counts is in the build directory now */
            if (mods[i]) kwb_cuda_module_free(mods[i]);
            free(msgs[i]);
            free(logs[i]);
        }
    free(mods); free(rcs); free(msgs); free(logs);
    job_free(j);
    atomic_fetch_sub(&prebuilds_running, 1);
    return NULL;
}

int kwb_cuda_prebuild(const kwb_cuda_build *builds, uint32_t n, uint32_t threads) {
    if (n == 0) return 0;
    prebuild_job *j = calloc(1, sizeof *j);
    if (!j) return kwb_fail(KWB_ENOMEM, "out of memory");
    j->builds = calloc(n, sizeof *j->builds);
    if (!j->builds) { free(j); return kwb_fail(KWB_ENOMEM, "out of memory"); }
    j->n = n;
    j->threads = threads < 1 ? 1 : threads;
    for (uint32_t i = 0; i < n; i++) {
        const kwb_cuda_build *b = &builds[i];
        kwb_cuda_build *c = &j->builds[i];
        *c = *b;
        c->source = b->source ? strdup(b->source) : NULL;
        c->name = b->name ? strdup(b->name) : NULL;
        c->arch = b->arch ? strdup(b->arch) : NULL;
        c->build_dir = b->build_dir ? strdup(b->build_dir) : NULL;
        c->defines = (const char *const *)strv_dup(b->defines);
        c->flags = (const char *const *)strv_dup(b->flags);
        c->include_dirs = (const char *const *)strv_dup(b->include_dirs);
    }
    pthread_attr_t attr;
    pthread_t tid;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    atomic_fetch_add(&prebuilds_running, 1);
    int rc = pthread_create(&tid, &attr, prebuild_main, j);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        atomic_fetch_sub(&prebuilds_running, 1);
        job_free(j);
        return kwb_fail(KWB_EIO, "cannot start a build thread");
    }
    return 0;
}

int kwb_cuda_prebuilds_running(void) { return atomic_load(&prebuilds_running); }

/* ---- accessors --------------------------------------------------------- */

const char *kwb_cuda_module_hash(const kwb_cuda_module *m) { return m->hash; }
const char *kwb_cuda_module_arch(const kwb_cuda_module *m) { return m->arch; }
const char *kwb_cuda_module_log(const kwb_cuda_module *m) { return m->log ? m->log : ""; }
const char *kwb_cuda_module_ptx(const kwb_cuda_module *m) { return m->ptx ? m->ptx : ""; }
const char *kwb_cuda_module_path(const kwb_cuda_module *m) { return m->path ? m->path : ""; }
int kwb_cuda_module_cached(const kwb_cuda_module *m) { return m->cached; }
const void *kwb_cuda_module_image(const kwb_cuda_module *m, size_t *len) {
    *len = m->image_len;
    return m->image;
}
uint32_t kwb_cuda_module_nkernels(const kwb_cuda_module *m) { return m->nkernels; }
const kwb_cuda_kernel_info *kwb_cuda_module_kernel(const kwb_cuda_module *m, uint32_t i) {
    return i < m->nkernels ? &m->kernels[i] : NULL;
}
