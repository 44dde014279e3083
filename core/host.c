/* host.c: the host backend: C sources compiled with the system compiler into
 * shared objects (content-addressed), functions called through libffi */
#include <dlfcn.h>
#include <errno.h>
#include <ffi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "host_ffi.h"
#include "kwb.h"
#include "proc.h"
#include "timing.h"
#include "util.h"

struct kwb_host_module {
    void *handle;
    char hash[65];
    char *path;
    char *log;      /* compiler warnings of a fresh build, "" when cached */
    int cached;
};

struct kwb_host_fn {
    kwb_host_module *module;
    void *sym;
    ffi_cif cif;
    kwb_ctype ret;
    uint32_t nargs;
    kwb_ctype *args;
    ffi_type **ftypes;
};

/* ---- toolchain identity (part of every build hash) -------------------- */

static pthread_mutex_t cc_lock = PTHREAD_MUTEX_INITIALIZER;
enum { CC_SLOTS = 16 };
static struct { char cc[256]; char *version; } cc_seen[CC_SLOTS];

/* `cc --version`, remembered per compiler for the life of the process (the
 * strings are never freed, so callers may keep the pointer). */
static int cc_identity(const char *cc, const char **out) {
    pthread_mutex_lock(&cc_lock);
    for (int i = 0; i < CC_SLOTS && cc_seen[i].version; i++)
        if (strcmp(cc_seen[i].cc, cc) == 0) {
            *out = cc_seen[i].version;
            pthread_mutex_unlock(&cc_lock);
            return 0;
        }
    pthread_mutex_unlock(&cc_lock);
    char *v = NULL;
    const char *argv[] = {cc, "--version", NULL};
    int rc = kwb_proc_run(argv, &v, 1 << 16);
    if (rc != 0) {
        free(v);
        return rc < 0 ? rc : kwb_fail(KWB_EIO, "compiler %s failed to report its version", cc);
    }
    pthread_mutex_lock(&cc_lock);
    int slot = 0;
    while (slot < CC_SLOTS && cc_seen[slot].version && strcmp(cc_seen[slot].cc, cc) != 0) slot++;
    if (slot == CC_SLOTS) {
        pthread_mutex_unlock(&cc_lock);
        free(v);
        return kwb_fail(KWB_EINVAL, "more than %d different compilers in one process", CC_SLOTS);
    }
    if (!cc_seen[slot].version) {   /* another thread may have filled it meanwhile */
        snprintf(cc_seen[slot].cc, sizeof cc_seen[slot].cc, "%s", cc);
        cc_seen[slot].version = v;
    } else free(v);
    *out = cc_seen[slot].version;
    pthread_mutex_unlock(&cc_lock);
    return 0;
}

/* ---- compile ----------------------------------------------------------- */

static size_t strv_len(const char *const *v) {
    size_t n = 0;
    while (v && v[n]) n++;
    return n;
}

static int module_open(const char *path, const char *hash, int cached, char *log, int load,
                       kwb_host_module **out) {
    void *h = load ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
    if (load && !h) {
        free(log);
        return kwb_fail(KWB_EIO, "cannot load %s: %s", path, dlerror());
    }
    kwb_host_module *m = calloc(1, sizeof *m);
    if (!m) { if (h) dlclose(h); free(log); return kwb_fail(KWB_ENOMEM, "out of memory"); }
    m->handle = h;
    memcpy(m->hash, hash, 65);
    m->path = strdup(path);
    m->log = log ? log : strdup("");
    m->cached = cached;
    *out = m;
    return 0;
}

/* The compiler and the build directory a build names, with their defaults. */
static const char *build_cc(const kwb_host_build *b) {
    const char *cc = b->cc ? b->cc : getenv("CC");
    return cc && *cc ? cc : "cc";
}
static const char *build_dir(const kwb_host_build *b) { return b->build_dir ? b->build_dir : "cache/host"; }
static const char *build_name(const kwb_host_build *b) { return b->name ? b->name : "kernel.c"; }

/* The one command line of a build: `cc -std=c11 -O2 -fPIC -shared -D... flags
 * -o out src`, and of its preprocessed view, the same with -E before -o. The
 * rules read what this command compiles, so the two may differ in nothing
 * else. argv and its -D strings are one allocation: free(c->argv). */
typedef struct { const char **argv; } cc_command;

static int command(const kwb_host_build *b, int preprocess, const char *out, const char *src, cc_command *c) {
    size_t nf = strv_len(b->flags), nd = strv_len(b->defines), dbytes = 0;
    for (size_t i = 0; i < nd; i++) dbytes += strlen(b->defines[i]) + 3;
    size_t slots = nf + nd + 12;
    char *mem = malloc(slots * sizeof(char *) + dbytes);
    if (!mem) return kwb_fail(KWB_ENOMEM, "out of memory");
    const char **argv = (const char **)(void *)mem;
    char *d = mem + slots * sizeof(char *);
    size_t a = 0;
    argv[a++] = build_cc(b);
    argv[a++] = "-std=c11";
    argv[a++] = "-O2";
    argv[a++] = "-fPIC";
    argv[a++] = "-shared";
    for (size_t i = 0; i < nd; i++) {
        size_t l = strlen(b->defines[i]) + 3;
        snprintf(d, l, "-D%s", b->defines[i]);
        argv[a++] = d;
        d += l;
    }
    for (size_t i = 0; i < nf; i++) argv[a++] = b->flags[i];
    if (preprocess) argv[a++] = "-E";
    argv[a++] = "-o";
    argv[a++] = out;
    argv[a++] = src;
    argv[a] = NULL;
    c->argv = argv;
    return 0;
}

/* Write the source as the compiler reads it: a #line naming the candidate's
 * file, then the text (so diagnostics and line markers name `name`). */
static int write_source(const char *path, const kwb_host_build *b) {
    FILE *f = fopen(path, "w");
    if (!f) return kwb_fail(KWB_EIO, "cannot write %s: %s", path, strerror(errno));
    fprintf(f, "#line 1 \"%s\"\n%s\n", build_name(b), b->source);
    if (fclose(f) != 0) { unlink(path); return kwb_fail(KWB_EIO, "cannot write %s", path); }
    return 0;
}

/* Run a build's command on a private copy of its source: 0 with the
 * compiler's output in *output, KWB_ECOMPILE when it fails (its output in
 * *log when log is given), another status when it cannot run. */
static int run_command(const kwb_host_build *b, int preprocess, const char *tag, const char *out,
                       char **output, char **log) {
    char src[4096];
    snprintf(src, sizeof src, "%s/%s.%ld.%lx.c", build_dir(b), tag, (long)getpid(), (unsigned long)pthread_self());
    int rc = write_source(src, b);
    if (rc) return rc;
    cc_command c = {0};
    rc = command(b, preprocess, out, src, &c);
    if (rc) { unlink(src); return rc; }
    char *text = NULL;
    rc = kwb_proc_run(c.argv, &text, 1 << 20);
    free(c.argv);
    unlink(src);
    if (rc < 0) { free(text); return rc; }
    if (rc != 0) {
        unlink(out);
        if (log) *log = text;
        else free(text);
        if (preprocess) return kwb_fail(KWB_ECOMPILE, "the preprocessor failed (exit status %d)", rc);
        return kwb_fail(KWB_ECOMPILE, "%s failed to compile %s (exit status %d)", build_cc(b), build_name(b), rc);
    }
    *output = text;
    return 0;
}

int kwb_host_compile(const kwb_host_build *b, kwb_host_module **out, char **log) {
    *out = NULL;
    if (log) *log = NULL;
    if (!b->source) return kwb_fail(KWB_EINVAL, "host compile needs a source");
    const char *cc = build_cc(b), *dir = build_dir(b), *name = build_name(b);
    const char *ident = NULL;
    int rc = cc_identity(cc, &ident);
    if (rc) return rc;

    /* The hash covers everything that determines the shared object. */
    kwb_strbuf key = {0};
    kwb_strbuf_addf(&key, "kwb-host-1\ncc=%s\n%s\n", cc, ident);
    for (size_t i = 0; i < strv_len(b->flags); i++) kwb_strbuf_addf(&key, "flag=%s\n", b->flags[i]);
    for (size_t i = 0; i < strv_len(b->defines); i++) kwb_strbuf_addf(&key, "define=%s\n", b->defines[i]);
    kwb_strbuf_addf(&key, "source=%s\n", name);
    kwb_strbuf_add(&key, b->source, strlen(b->source));
    if (key.oom) { free(key.s); return kwb_fail(KWB_ENOMEM, "out of memory"); }
    char hash[65];
    rc = kwb_sha256_hex(key.s, key.len, hash);
    free(key.s);
    if (rc) return rc;

    char so[4096], tmp_so[4096];
    snprintf(so, sizeof so, "%s/%s.so", dir, hash);
    if (access(so, R_OK) == 0) return module_open(so, hash, 1, NULL, !b->no_load, out);

    if (kwb_mkdirs(dir) != 0) return kwb_fail(KWB_EIO, "cannot create %s: %s", dir, strerror(errno));
    /* Private temporary names, then an atomic rename: concurrent builders of
     * the same source never see a half-written object. */
    snprintf(tmp_so, sizeof tmp_so, "%s/%s.%ld.%lx.so", dir, hash, (long)getpid(), (unsigned long)pthread_self());
    char *output = NULL;
    rc = run_command(b, 0, hash, tmp_so, &output, log);
    if (rc) return rc;
    if (rename(tmp_so, so) != 0) {
        unlink(tmp_so);
        free(output);
        return kwb_fail(KWB_EIO, "cannot rename into %s: %s", so, strerror(errno));
    }
    return module_open(so, hash, 0, output, !b->no_load, out);
}

int kwb_host_preprocess(const kwb_host_build *b, char **text, char **log) {
    *text = NULL;
    if (log) *log = NULL;
    if (!b->source) return kwb_fail(KWB_EINVAL, "host preprocess needs a source");
    const char *dir = build_dir(b);
    if (kwb_mkdirs(dir) != 0) return kwb_fail(KWB_EIO, "cannot create %s: %s", dir, strerror(errno));
    char out[4096];
    snprintf(out, sizeof out, "%s/view.%ld.%lx.i", dir, (long)getpid(), (unsigned long)pthread_self());
    char *output = NULL;
    int rc = run_command(b, 1, "view", out, &output, log);
    if (rc) return rc;
    free(output);   /* the preprocessed text is in the file; warnings are the build's */
    size_t len = 0;
    *text = kwb_read_file(out, &len);
    unlink(out);
    if (!*text) return kwb_fail(KWB_EIO, "cannot read the preprocessed %s", build_name(b));
    return 0;
}

int kwb_host_symbols(const char *path, char **text) {
    *text = NULL;
    const char *argv[] = {"nm", "-P", path, NULL};
    char *out = NULL;
    int rc = kwb_proc_run(argv, &out, 1 << 22);
    if (rc < 0) { free(out); return rc; }
    if (rc != 0) {
        int e = kwb_fail(KWB_EIO, "nm failed on %s (exit status %d): %.200s", path, rc, out ? out : "");
        free(out);
        return e;
    }
    *text = out;
    return 0;
}

const char *kwb_host_module_hash(const kwb_host_module *m) { return m->hash; }
const char *kwb_host_module_path(const kwb_host_module *m) { return m->path; }
const char *kwb_host_module_log(const kwb_host_module *m) { return m->log; }
int kwb_host_module_cached(const kwb_host_module *m) { return m->cached; }

void kwb_host_module_free(kwb_host_module *m) {
    if (!m) return;
    if (m->handle) dlclose(m->handle);
    free(m->path);
    free(m->log);
    free(m);
}

/* ---- functions and calls ----------------------------------------------- */

ffi_type *kwb_host_ffi_type(kwb_ctype t) {
    switch (t) {
    case KWB_C_VOID: return &ffi_type_void;
    case KWB_C_I32: return &ffi_type_sint32;
    case KWB_C_U32: return &ffi_type_uint32;
    case KWB_C_I64: return &ffi_type_sint64;
    case KWB_C_U64: return &ffi_type_uint64;
    case KWB_C_F32: return &ffi_type_float;
    case KWB_C_F64: return &ffi_type_double;
    case KWB_C_PTR: return &ffi_type_pointer;
    }
    return NULL;
}

kwb_host_fn *kwb_host_fn_new(kwb_host_module *m, const char *name, kwb_ctype ret,
                             const kwb_ctype *args, uint32_t nargs) {
    if (!m->handle) { kwb_fail(KWB_EINVAL, "module %.12s was built to run in a sandbox, not here", m->hash); return NULL; }
    dlerror();
    void *sym = dlsym(m->handle, name);
    if (!sym) { kwb_fail(KWB_ENOSYM, "no function %s in module %.12s", name, m->hash); return NULL; }
    if (!kwb_host_ffi_type(ret)) { kwb_fail(KWB_EINVAL, "bad return type %d", (int)ret); return NULL; }
    kwb_host_fn *f = calloc(1, sizeof *f);
    if (!f) { kwb_fail(KWB_ENOMEM, "out of memory"); return NULL; }
    f->args = calloc(nargs + 1, sizeof *f->args);
    f->ftypes = calloc(nargs + 1, sizeof *f->ftypes);
    if (!f->args || !f->ftypes) { kwb_host_fn_free(f); kwb_fail(KWB_ENOMEM, "out of memory"); return NULL; }
    for (uint32_t i = 0; i < nargs; i++) {
        if (args[i] == KWB_C_VOID || !kwb_host_ffi_type(args[i])) {
            kwb_host_fn_free(f);
            kwb_fail(KWB_EINVAL, "argument %u of %s has no value type", i + 1, name);
            return NULL;
        }
        f->args[i] = args[i];
        f->ftypes[i] = kwb_host_ffi_type(args[i]);
    }
    f->module = m;
    f->sym = sym;
    f->ret = ret;
    f->nargs = nargs;
    if (ffi_prep_cif(&f->cif, FFI_DEFAULT_ABI, nargs, kwb_host_ffi_type(ret), f->ftypes) != FFI_OK) {
        kwb_host_fn_free(f);
        kwb_fail(KWB_EINVAL, "libffi cannot describe %s", name);
        return NULL;
    }
    return f;
}

void kwb_host_fn_free(kwb_host_fn *f) {
    if (!f) return;
    free(f->args);
    free(f->ftypes);
    free(f);
}

uint32_t kwb_host_fn_nargs(const kwb_host_fn *f) { return f->nargs; }
kwb_ctype kwb_host_fn_arg(const kwb_host_fn *f, uint32_t i) { return f->args[i]; }
kwb_ctype kwb_host_fn_ret(const kwb_host_fn *f) { return f->ret; }

/* libffi wants pointers to each argument value and, for integral returns
 * narrower than a register, an ffi_arg-sized slot. */
void kwb_host_ffi_call(ffi_cif *cif, void *fn, kwb_ctype ret, void **values, kwb_value *out) {
    ffi_arg wide = 0;
    kwb_value r = {0};
    switch (ret) {
    case KWB_C_I32: ffi_call(cif, FFI_FN(fn), &wide, values); r.i32 = (int32_t)wide; break;
    case KWB_C_U32: ffi_call(cif, FFI_FN(fn), &wide, values); r.u32 = (uint32_t)wide; break;
    default: ffi_call(cif, FFI_FN(fn), &r, values); break;
    }
    if (out) *out = r;
}

static void call_once(kwb_host_fn *f, void **values, kwb_value *ret) {
    kwb_host_ffi_call(&f->cif, f->sym, f->ret, values, ret);
}

int kwb_host_fn_call(kwb_host_fn *f, const kwb_value *args, kwb_value *ret) {
    void **values = calloc(f->nargs + 1, sizeof *values);
    if (!values) return kwb_fail(KWB_ENOMEM, "out of memory");
    for (uint32_t i = 0; i < f->nargs; i++) values[i] = (void *)&args[i];
    call_once(f, values, ret);
    free(values);
    return 0;
}

typedef struct { kwb_host_fn *f; void **values; } time_ctx;

static int sample_host(void *ctx, uint32_t batch, double *seconds) {
    time_ctx *c = ctx;
    double t0 = kwb_now();
    for (uint32_t i = 0; i < batch; i++) call_once(c->f, c->values, NULL);
    *seconds = kwb_now() - t0;
    return 0;
}

int kwb_host_fn_time(kwb_host_fn *f, const kwb_value *args, const kwb_time_opts *o,
                     kwb_stats *st) {
    void **values = calloc(f->nargs + 1, sizeof *values);
    if (!values) return kwb_fail(KWB_ENOMEM, "out of memory");
    for (uint32_t i = 0; i < f->nargs; i++) values[i] = (void *)&args[i];
    time_ctx c = {f, values};
    int rc = kwb_time_loop(sample_host, &c, o, st);
    free(values);
    return rc;
}
