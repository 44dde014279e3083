/* kwb.h: the public C API of kwb.
 *
 * FFI-clean on purpose: opaque types, <stdint.h> types, enums, plain result
 * structs and prototypes, no macros beyond the include guard, so LuaJIT's
 * ffi.cdef (or any other FFI) can read the declarations between the guard as
 * they are.  Every function that can fail returns 0 on success and a negative
 * kwb_status otherwise; kwb_last_error() gives the sentence for the calling
 * thread. */
#ifndef KWB_H
#define KWB_H

#include <stddef.h>
#include <stdint.h>

typedef enum kwb_status {
    KWB_OK = 0,
    KWB_EINVAL = -1,      /* bad argument */
    KWB_ENOMEM = -2,      /* out of memory */
    KWB_ECOMPILE = -3,    /* the compiler rejected the source */
    KWB_ENOSYM = -4,      /* no such function in a module */
    KWB_EIO = -5,         /* file or process failure */
    KWB_ERUN = -6,        /* a kernel or timing run failed */
    KWB_ENODRIVER = -7,   /* no usable CUDA driver */
    KWB_ENODEVICE = -8,   /* the driver sees no GPU */
    KWB_ENONVRTC = -9,    /* no usable NVRTC library */
    KWB_ENONVCC = -10,    /* no working nvcc */
    KWB_ENOARCH = -11     /* no CUDA arch given and no device to take it from */
} kwb_status;

/* The sentence and the status of this thread's last failure (kwb_fail). */
const char *kwb_last_error(void);
int kwb_last_status(void);
const char *kwb_version(void);

/* ---- element types ---------------------------------------------------- */

typedef enum kwb_dtype {
    KWB_F32, KWB_F64, KWB_F16, KWB_BF16,
    KWB_I8, KWB_I32, KWB_I64, KWB_U8, KWB_U32, KWB_U64,
    KWB_DTYPE_COUNT
} kwb_dtype;

const char *kwb_dtype_name(kwb_dtype t);
int kwb_dtype_from_name(const char *name);     /* -1 if unknown */
size_t kwb_dtype_size(kwb_dtype t);
int kwb_dtype_is_float(kwb_dtype t);
uint16_t kwb_f32_to_f16(float x);              /* round to nearest even */
float kwb_f16_to_f32(uint16_t h);
uint16_t kwb_f32_to_bf16(float x);             /* round to nearest even */
float kwb_bf16_to_f32(uint16_t h);

/* ---- host buffers ------------------------------------------------------ */

typedef struct kwb_buffer kwb_buffer;

kwb_buffer *kwb_buffer_new(kwb_dtype t, uint64_t n);   /* NULL on failure */
void kwb_buffer_free(kwb_buffer *b);
/* 1 when bytes just outside the buffer (its redzones) changed since the last
 * check, with the first and last such offset in bytes from the data's start
 * (negative: before it); the redzones are restored. 0 when intact. */
int kwb_buffer_redzone(kwb_buffer *b, int64_t *first, int64_t *last);
/* The shared part of a buffer (its redzones and data, a memfd): what a
 * sandbox maps between guard pages of its own. KWB_EINVAL for a buffer
 * past the process's file size limit, which is private memory instead. */
typedef struct kwb_buffer_shared {
    int fd;                 /* owned by the buffer */
    size_t bytes;           /* the memfd's size: a whole number of pages */
    size_t data_offset;     /* where the data starts in it */
    uint64_t serial;        /* unique among this process's buffers */
} kwb_buffer_shared;
int kwb_buffer_share(const kwb_buffer *b, kwb_buffer_shared *s);
void *kwb_buffer_data(const kwb_buffer *b);
uint64_t kwb_buffer_len(const kwb_buffer *b);
kwb_dtype kwb_buffer_dtype(const kwb_buffer *b);
size_t kwb_buffer_bytes(const kwb_buffer *b);
double kwb_buffer_get(const kwb_buffer *b, uint64_t i);
void kwb_buffer_set(kwb_buffer *b, uint64_t i, double v);
/* Seeded fills. Element i is a pure function of (seed, i), so a device fill can
 * reproduce the host's values exactly. Integer types draw uniformly from the
 * integers in [lo, hi]. */
int kwb_buffer_fill_uniform(kwb_buffer *b, uint64_t seed, double lo, double hi);
int kwb_buffer_fill_normal(kwb_buffer *b, uint64_t seed, double mean, double stdev);
/* The same distribution from a sequential stream: faster, other values. */
int kwb_buffer_fill_normal_stream(kwb_buffer *b, uint64_t seed, double mean, double stdev);
void kwb_buffer_fill_value(kwb_buffer *b, double v);
/* Poison: every element set to the dtype's poison bit pattern (a signalling
 * NaN for floats, 0xA5 bytes for integers). */
void kwb_buffer_poison(kwb_buffer *b);
int kwb_buffer_is_poison(const kwb_buffer *b, uint64_t i);
/* How many elements still hold the poison, and the first (-1: none). */
uint64_t kwb_buffer_poisoned(const kwb_buffer *b, int64_t *first);
int kwb_buffer_copy(kwb_buffer *dst, const kwb_buffer *src);
/* SHA-256 of the bytes, as 64 hex digits into out[65]. */
int kwb_buffer_checksum(const kwb_buffer *b, char *out);
/* A keyed 64-bit digest of the bytes: fast, unforgeable without the key. */
uint64_t kwb_buffer_digest(const kwb_buffer *b, uint64_t key);

/* ---- verification ------------------------------------------------------ */

typedef struct kwb_diff {
    double max_abs;        /* max |out - ref| over finite, written elements */
    double max_rel;        /* max |out - ref| / |ref| where ref != 0 */
    double rel_l2;         /* ||out - ref||_2 / ||ref||_2 (absolute if ref is all zero) */
    uint64_t n;            /* elements compared */
    uint64_t nan;          /* NaN in out (poison not counted) */
    uint64_t inf;          /* +-Inf in out */
    uint64_t poison;       /* elements of out still holding the poison pattern */
    uint64_t ref_nonfinite;/* NaN or Inf in the reference itself */
    double ref_mean;       /* the mean of the reference's finite elements (0 if none) */
    uint64_t bad;          /* elements outside atol + rtol * |ref| (poison, NaN and Inf count as bad) */
    int64_t first_bad;     /* index of the first bad element, -1 if none */
    int64_t worst;         /* index of the largest |out - ref|, -1 if none */
} kwb_diff;

int kwb_compare(const kwb_buffer *out, const kwb_buffer *ref, double atol, double rtol,
                kwb_diff *d);

/* ---- hashing ----------------------------------------------------------- */

/* SHA-256 of data, as 64 hex digits into out[65]. */
int kwb_sha256_hex(const void *data, size_t len, char *out);

/* HMAC-SHA-256 of data under key, as 64 hex digits into out[65]. */
int kwb_hmac_sha256_hex(const void *key, size_t keylen, const void *data, size_t len, char *out);

/* The code of a built module (a host shared object or a CUDA cubin, an ELF
 * image of len bytes), as 64 hex digits into out[65]: a SHA-256 over the
 * sections that decide what it does once loaded, without what only names or
 * describes the build (notes such as the build id, debug and line
 * information, symbol and file names). KWB_EINVAL for an image it cannot read. */
int kwb_code_digest(const void *image, size_t len, char *out);

/* ---- timing ------------------------------------------------------------ */

typedef struct kwb_time_opts {
    double warmup_s;       /* run at least this long before sampling */
    uint32_t warmup_min;   /* and at least this many calls */
    uint32_t min_samples;  /* never stop before this many samples */
    uint32_t max_samples;  /* hard bound on samples */
    double cap_s;          /* time cap for sampling */
    double target_ci;      /* stop when the 95% CI of the median is within +-target_ci (0.005) */
    double min_sample_s;   /* batch calls so one sample lasts at least this long */
} kwb_time_opts;

typedef struct kwb_stats {
    double median, min, max, mean, p10, p90;
    double spread;         /* stdev / mean */
    double ci_lo, ci_hi;   /* 95% confidence interval of the median */
    uint32_t n;            /* samples */
    uint32_t batch;        /* calls per sample (times are per call) */
    uint32_t warmup;       /* warm-up calls */
    int capped;            /* 1 if the time cap or max_samples ended sampling */
} kwb_stats;

void kwb_time_opts_default(kwb_time_opts *o);
/* Summary statistics of n per-call times (sorted in place). */
void kwb_stats_compute(double *samples, uint32_t n, kwb_stats *st);
/* The stop rule: 1 when the 95% CI of the median of the sorted samples lies
 * within +-rel of the median. */
int kwb_stats_converged(const double *sorted, uint32_t n, double rel);
double kwb_now(void);  /* monotonic seconds */

/* ---- host backend ------------------------------------------------------ */

typedef struct kwb_host_module kwb_host_module;
typedef struct kwb_host_fn kwb_host_fn;

/* Argument and return types of a host kernel. */
typedef enum kwb_ctype {
    KWB_C_VOID, KWB_C_I32, KWB_C_U32, KWB_C_I64, KWB_C_U64,
    KWB_C_F32, KWB_C_F64, KWB_C_PTR
} kwb_ctype;

typedef union kwb_value {
    int32_t i32; uint32_t u32; int64_t i64; uint64_t u64;
    float f32; double f64; void *ptr;
} kwb_value;

typedef struct kwb_host_build {
    const char *source;     /* C source text */
    const char *name;       /* file name shown in diagnostics ("kernel.c") */
    const char *cc;         /* compiler, NULL for $CC or "cc" */
    const char *const *flags;    /* NULL-terminated extra flags, or NULL */
    const char *const *defines;  /* NULL-terminated "NAME=VALUE" strings, or NULL */
    const char *build_dir;  /* where shared objects are kept */
    int no_load;            /* 1: build only; never load it into this process (a sandbox will) */
} kwb_host_build;

/* Compile (or find in build_dir) a shared object. On KWB_ECOMPILE *log holds
 * the compiler's output (free with kwb_free). */
int kwb_host_compile(const kwb_host_build *b, kwb_host_module **out, char **log);
/* The preprocessed source of a build: the build's own command with -E, so
 * the text is what kwb_host_compile compiles (its `# N "file"` markers name
 * b->name for the source's own lines). *text: free with kwb_free. On
 * KWB_ECOMPILE *log holds the compiler's output. */
int kwb_host_preprocess(const kwb_host_build *b, char **text, char **log);
/* The symbol table of a built object as `nm -P` prints it (run without a
 * shell). *text: free with kwb_free. */
int kwb_host_symbols(const char *path, char **text);
const char *kwb_host_module_hash(const kwb_host_module *m);
const char *kwb_host_module_path(const kwb_host_module *m);
const char *kwb_host_module_log(const kwb_host_module *m);
int kwb_host_module_cached(const kwb_host_module *m);
void kwb_host_module_free(kwb_host_module *m);
kwb_host_fn *kwb_host_fn_new(kwb_host_module *m, const char *name, kwb_ctype ret,
                             const kwb_ctype *args, uint32_t nargs);
void kwb_host_fn_free(kwb_host_fn *f);
uint32_t kwb_host_fn_nargs(const kwb_host_fn *f);
kwb_ctype kwb_host_fn_arg(const kwb_host_fn *f, uint32_t i);
kwb_ctype kwb_host_fn_ret(const kwb_host_fn *f);
int kwb_host_fn_call(kwb_host_fn *f, const kwb_value *args, kwb_value *ret);
int kwb_host_fn_time(kwb_host_fn *f, const kwb_value *args, const kwb_time_opts *o,
                     kwb_stats *st);

/* ---- sandboxes ---------------------------------------------------------- */

/* A sandbox is a process of its own that runs one candidate's host kernel:
 * kwb itself started afresh (nothing of the caller's memory), with an empty
 * environment, as an unprivileged uid when the caller is root, dying with
 * its parent, under a seccomp filter that allows the system calls a kernel
 * and the dynamic loader need and no others (no processes, threads, signals,
 * files or sockets once the module is loaded). It sees only the buffers
 * passed to it, mapped from their memfds between guard pages of its own.
 * Each call is timed by the caller on the sandbox's CPU clock, read when the
 * sandbox sleeps waiting for its next call, so a kernel cannot shorten its
 * time by answering early or by doing its work between calls. */
typedef struct kwb_sandbox kwb_sandbox;

typedef enum kwb_sandbox_outcome {
    KWB_SANDBOX_OK,          /* the call returned */
    KWB_SANDBOX_CRASHED,     /* the process died (signal or exit): detail says how */
    KWB_SANDBOX_FORBIDDEN,   /* a system call outside the filter: detail names it */
    KWB_SANDBOX_TIMEOUT,     /* past the call's limit: killed */
} kwb_sandbox_outcome;

typedef struct kwb_sandbox_result {
    kwb_sandbox_outcome outcome;
    double cpu_s;            /* the call's time on the sandbox's CPU clock */
    double wall_s;           /* from the request to the sandbox asleep again */
    double between_s;        /* CPU time it used since the previous call ended (0 for an honest one) */
    kwb_value ret;
    char detail[256];
} kwb_sandbox_result;

typedef struct kwb_sandbox_opts {
    double limit_s;          /* CPU seconds the module's initialisers may take */
    int keep_output;         /* 1: its stdout and stderr are the caller's; 0: /dev/null */
} kwb_sandbox_opts;

/* Start a sandbox that loads the shared object at path and resolves symbol
 * with the given prototype. The module's initialisers (constructors) run in
 * the sandbox under its filter, never while it loads. KWB_ENOSYM (no such
 * function), KWB_ERUN (the candidate's doing: r says forbidden, timeout or
 * crashed, while its module loaded or its initialisers ran), KWB_EIO (the
 * module does not load, the process cannot start). */
int kwb_sandbox_start(const char *path, const char *symbol, kwb_ctype ret, const kwb_ctype *args,
                      uint32_t nargs, const kwb_sandbox_opts *o, kwb_sandbox **out, kwb_sandbox_result *r);
/* One call; bufs[i] is the buffer behind pointer argument i (NULL for a
 * scalar; args[i].ptr is then ignored). The limit is CPU seconds. A result
 * other than OK ends the sandbox. Returns 0 with r filled, or a status when
 * the call could not be made (KWB_EINVAL). */
int kwb_sandbox_call(kwb_sandbox *s, const kwb_value *args, kwb_buffer *const *bufs, double limit_s,
                     kwb_sandbox_result *r);
/* count calls at once (1 to 64), queued together so the sandbox runs them
 * back to back: args and bufs hold count x nargs entries, call after call;
 * r->cpu_s is their total, the limit is limit_s per call. While they run the
 * sandbox holds their buffers and no other: any buffer mapped there for
 * earlier calls and not used by these is unmapped first. */
int kwb_sandbox_calls(kwb_sandbox *s, uint32_t count, const kwb_value *args, kwb_buffer *const *bufs,
                      double limit_s, kwb_sandbox_result *r);
int kwb_sandbox_pid(const kwb_sandbox *s);
void kwb_sandbox_free(kwb_sandbox *s);   /* kills the process and reaps it */
/* The sandbox's own side: main() runs it for `kwb --sandbox-child ...`. */
int kwb_sandbox_main(int argc, char **argv);
/* At the start of a host worker that root started with its sandboxes' uid
 * as its real one (core/worker.c): that uid made its saved set-user-ID,
 * its own the real and effective. 1 when it did, 0 when there was none, -1
 * on failure. */
int kwb_sandbox_take_uid(void);

/* ---- workers ------------------------------------------------------------ */

/* A worker is a child process (normally `kwb worker`) that runs candidate
 * code away from the main process. It talks over one socket (its fd 3) in
 * frames: a 4-byte big-endian length, then that many bytes. Its stdout and
 * stderr go to a pipe the parent drains into a capped buffer. It starts in a
 * fresh scratch directory (its cwd), with only the environment given, resource
 * limits, no core dumps, and, when the parent is root, as an unprivileged uid
 * inside a private mount namespace (the whole tree read-only but the scratch
 * directory) and an empty network namespace. */
typedef struct kwb_worker kwb_worker;

typedef struct kwb_worker_opts {
    const char *exe;              /* program, NULL: this executable (/proc/self/exe) */
    const char *const *argv;      /* NULL-terminated argv (argv[0] included) */
    const char *const *env;       /* NULL-terminated "NAME=VALUE": the whole environment;
                                     "%SCRATCH%" in a value becomes the scratch path */
    const char *scratch_parent;   /* where the scratch directory is made ("/tmp") */
    const char *lock_path;        /* device lock, opened for the worker as fd 5; NULL: none */
    uint64_t cpu_s;               /* RLIMIT_CPU seconds, 0: unlimited */
    uint64_t fsize;               /* RLIMIT_FSIZE bytes, 0: unlimited */
    uint64_t nproc;               /* processes beyond the uid's current ones (RLIMIT_NPROC), 0: unlimited */
    uint64_t as;                  /* RLIMIT_AS bytes (host workers only), 0: unlimited */
    uint64_t output_cap;          /* bytes of output kept between two takes */
    int32_t uid, gid;             /* who a root parent drops the worker to (65534) */
    int32_t isolate;              /* 1: private mount and network namespaces when root */
    int32_t sandbox_uid;          /* -1, or (root parent) the uid its sandboxes run as, given it
                                     as its real uid at exec (kwb_sandbox_take_uid) */
} kwb_worker_opts;

/* The largest frame either side sends or takes: a sender checks a message's
 * encoded length against it before sending (kwb_worker_send and
 * kwb_worker_reply refuse a larger one, and the worker's Lua side says why). */
typedef enum kwb_worker_limit { KWB_WORKER_MAX_FRAME = 67108864 } kwb_worker_limit;

typedef enum kwb_worker_event {
    KWB_WORKER_TIMEOUT = 0,       /* nothing before the deadline */
    KWB_WORKER_MESSAGE = 1,       /* a whole frame arrived */
    KWB_WORKER_EXITED = 2         /* the worker is gone (see kwb_worker_status) */
} kwb_worker_event;

typedef struct kwb_worker_state {
    int32_t pid;
    int32_t alive;
    int32_t exit_code;            /* -1 unless it exited */
    int32_t signal;               /* the signal that ended it, 0 if none */
    int32_t killed;               /* 1 if kwb_worker_kill ended it */
    int32_t isolated;             /* 1 if it got its own mount and network namespaces */
    int32_t uid;                  /* the uid it runs as */
    uint64_t output_total;        /* bytes it wrote since the last take */
} kwb_worker_state;

void kwb_worker_opts_default(kwb_worker_opts *o);
int kwb_worker_start(const kwb_worker_opts *o, kwb_worker **out);
const char *kwb_worker_scratch(const kwb_worker *w);
/* Also notices a worker that died while nobody waited on it. */
void kwb_worker_status(kwb_worker *w, kwb_worker_state *st);
/* Send one frame; KWB_EIO if the worker is gone. */
int kwb_worker_send(kwb_worker *w, const void *data, size_t len);
/* Wait up to timeout_s (< 0: forever) for a frame from any of the n workers,
 * draining their output meanwhile. Returns a kwb_worker_event, *which the
 * worker's index; a message is in *msg (free with kwb_free), *len bytes. */
int kwb_worker_wait(kwb_worker *const *ws, uint32_t n, double timeout_s, uint32_t *which,
                    char **msg, size_t *len);
/* SIGKILL the worker's process group and reap it. */
void kwb_worker_kill(kwb_worker *w);
/* The output captured since the last take (at most output_cap bytes, the
 * start kept), NUL-terminated; *total counts every byte written. */
char *kwb_worker_take_output(kwb_worker *w, size_t *len, uint64_t *total);
/* Kill if alive, close, remove the scratch directory. */
void kwb_worker_free(kwb_worker *w);
/* Remove the stale scratch directories under parent that a killed kwb left:
 * each named kwb-worker-XXXXXX, a directory (not a link), unchanged for
 * min_age_s seconds, whose lock no live worker handle holds and where no
 * process has its working directory; only this uid's unless root. Returns how
 * many were removed, < 0 if parent cannot be read. */
int kwb_worker_sweep(const char *parent, double min_age_s);

/* Inside a worker: the protocol on fd 3, the device lock on fd 5. */
int kwb_worker_recv(char **msg, size_t *len);            /* 1 a frame, 0 end of input, < 0 error */
int kwb_worker_reply(const void *data, size_t len);
int kwb_worker_lock(int32_t on);                         /* 1 locked/unlocked, 0 no lock given */
int kwb_worker_reap(void);                               /* kill and reap stray children; their count */
void kwb_worker_keep(int pid, int keep);                 /* a child of the judge's own (a reference process) that
                                                            kwb_worker_reap spares (keep = 1) or no longer (0) */

void kwb_free(void *p);

/* ---- candidate cache ---------------------------------------------------- */

/* One SQLite database (WAL) shared by any number of kwb processes, holding the
 * records of candidates, builds, results and runs, and content-addressed blobs
 * (zstd frames; a blob may be stored as a delta against a base blob, with a
 * bounded chain, and a blob that is a base keeps a second copy of its frame,
 * its mirror). A handle is for one thread at a time. */
typedef struct kwb_cache kwb_cache;
typedef struct kwb_cache_bundle kwb_cache_bundle;

/* Statuses of the cache besides the common ones. */
typedef enum kwb_cache_status {
    KWB_CACHE_ENOTFOUND = -101,   /* no such blob */
    KWB_CACHE_ECORRUPT = -102,    /* a blob or bundle fails its hash check */
    KWB_CACHE_EVERSION = -103,    /* schema or bundle format newer than this kwb */
    KWB_CACHE_EDB = -104          /* SQLite reported an error */
} kwb_cache_status;

typedef struct kwb_blob_info {
    char base[65];          /* the blob this frame is a delta against, "" for a full frame */
    uint32_t depth;         /* 0 for a full frame, else the base's depth + 1 */
    uint64_t raw_size;      /* bytes of content */
    uint64_t stored_size;   /* bytes of the stored zstd frame (one copy) */
    uint32_t mirrored;      /* 1 if a second copy of the frame is kept (the blob is a base) */
} kwb_blob_info;

/* The state of one stored copy of a blob's frame. */
typedef enum kwb_blob_copy {
    KWB_COPY_OK = 0,        /* decodes to the blob's content */
    KWB_COPY_CORRUPT = 1,   /* does not */
    KWB_COPY_NONE = 2       /* no such copy (a blob nothing is stored against has no mirror) */
} kwb_blob_copy;

typedef struct kwb_blob_health {
    int32_t frame;          /* kwb_blob_copy of the first copy */
    int32_t mirror;         /* kwb_blob_copy of the mirror */
} kwb_blob_health;

/* The schema version this kwb writes (PRAGMA user_version). */
int kwb_cache_schema_version(void);
/* Longest delta chain: a blob is stored as a full frame when its base is this deep. */
int kwb_cache_max_depth(void);
/* Open (creating the file and its directory if needed) and migrate the schema.
 * KWB_CACHE_EVERSION if the file's schema is newer than this kwb. */
int kwb_cache_open(const char *path, kwb_cache **out);
void kwb_cache_close(kwb_cache *c);
const char *kwb_cache_path(const kwb_cache *c);
/* Store data; id gets its SHA-256 (64 hex digits + NUL). base, if not NULL or
 * "", names a blob of similar content to delta against. *created (may be
 * NULL) is 1 if the blob was new, 0 if it was already there. */
int kwb_cache_blob_put(kwb_cache *c, const void *data, size_t len, const char *base,
                       char *id, int *created);
/* Read a blob back (free *data with kwb_free; it is NUL-terminated). Checks
 * every frame of its chain against its hash, reading a frame's mirror where
 * the frame is corrupt: KWB_CACHE_ECORRUPT names the blob none of whose
 * copies is sound; KWB_CACHE_ENOTFOUND if the blob (or a base) is missing. */
int kwb_cache_blob_get(kwb_cache *c, const char *id, char **data, size_t *len);
int kwb_cache_blob_info(kwb_cache *c, const char *id, kwb_blob_info *info);
/* Decode each stored copy of blob id's frame (against its base's content)
 * and report their states in *h. Returns 0 when they could be checked, even
 * if corrupt (kwb_last_error then says what was wrong), and an error when the
 * blob is missing or its base cannot be rebuilt. */
int kwb_cache_blob_check(kwb_cache *c, const char *id, kwb_blob_health *h);
/* Rewrite a corrupt copy of blob id's frame from its sound copy (call inside
 * a write transaction); *fixed is 1 if a copy was rewritten. KWB_CACHE_ECORRUPT
 * if no copy is sound. */
int kwb_cache_blob_repair(kwb_cache *c, const char *id, int *fixed);

/* Write a bundle file: the manifest (JSON text), nrec records (each a table
 * name and a JSON text), and the blobs named, with every base their chains
 * need. Each blob is checked before it is written. The file appears whole or
 * not at all. */
int kwb_cache_export(kwb_cache *c, const char *path, const char *manifest, uint32_t nrec,
                     const char *const *tables, const char *const *records, uint32_t nblob,
                     const char *const *blobs);
/* Read and verify a whole bundle: magic, format version, the hash of every
 * entry and of the whole file, and every blob's content. Nothing is written. */
int kwb_cache_bundle_open(const char *path, kwb_cache_bundle **out);
void kwb_cache_bundle_close(kwb_cache_bundle *b);
const char *kwb_cache_bundle_manifest(const kwb_cache_bundle *b);
uint32_t kwb_cache_bundle_nrecords(const kwb_cache_bundle *b);
/* The i-th record: its table name and JSON text (owned by the bundle). */
int kwb_cache_bundle_record(const kwb_cache_bundle *b, uint32_t i, const char **table, const char **json);
uint32_t kwb_cache_bundle_nblobs(const kwb_cache_bundle *b);
/* The i-th blob's id (owned by the bundle), NULL if out of range. */
const char *kwb_cache_bundle_blob(const kwb_cache_bundle *b, uint32_t i);
/* Insert the bundle's blobs that the cache lacks (inside the caller's
 * transaction, if any); *added (may be NULL) counts them. */
int kwb_cache_import_blobs(kwb_cache *c, const kwb_cache_bundle *b, uint32_t *added);

/* ---- CUDA backend ------------------------------------------------------
 * The driver, NVRTC, NVML and cuBLAS are loaded with dlopen on first use.
 * Without a driver, compiling still works and every device call fails with
 * one sentence ("no CUDA driver: libcuda.so.1 not found"). */

typedef struct kwb_cuda_module kwb_cuda_module;
typedef struct kwb_cuda_fn kwb_cuda_fn;
typedef struct kwb_cuda_buffer kwb_cuda_buffer;
typedef struct kwb_cuda_plan kwb_cuda_plan;
typedef struct kwb_cuda_pinned kwb_cuda_pinned;

/* Device-only element types, beside the kwb_dtype values. */
typedef enum kwb_cuda_dtype { KWB_CUDA_E4M3 = 64, KWB_CUDA_E2M1 = 65 } kwb_cuda_dtype;

typedef struct kwb_cuda_device_info {
    char name[256];
    char pci_bus_id[32];
    int32_t ordinal, cc_major, cc_minor, sms, l2_bytes, clock_khz, mem_clock_khz, bus_width;
    int32_t smem_optin, max_threads, driver_version;
    /* what device code can reach of the host: page-locked memory at its host
     * address (unified addressing), and any pageable memory as well */
    int32_t unified_addressing, pageable_access;
    uint64_t memory_bytes;
} kwb_cuda_device_info;

int kwb_cuda_device_count(int *n);
int kwb_cuda_device_info_get(int ordinal, kwb_cuda_device_info *d);
int kwb_cuda_nvrtc_version(int *major, int *minor);
int kwb_cuda_arch_valid(const char *arch);   /* sm_80, sm_90a, sm_100a, ... */
/* Device memory free and in all (cuMemGetInfo) as the primary context sees it. */
int kwb_cuda_mem_info(uint64_t *free_bytes, uint64_t *total_bytes);

typedef enum kwb_cuda_kind { KWB_CUDA_NVRTC, KWB_CUDA_NVCC } kwb_cuda_kind;

typedef struct kwb_cuda_build {
    const char *source;
    const char *name;          /* file name in diagnostics ("kernel.cu") */
    const char *arch;          /* "sm_90", "sm_90a", ...; NULL: the device's */
    const char *const *defines;       /* NULL-terminated "NAME=VALUE" */
    const char *const *flags;         /* NULL-terminated extra compiler options */
    const char *const *include_dirs;  /* NULL-terminated; the CUDA headers are added */
    const char *build_dir;     /* <cache dir>/build/cuda */
    int lineinfo;
    int nvcc;                  /* kwb_cuda_compile_many: build this one with nvcc */
} kwb_cuda_build;

/* One kernel's resources, from ptxas's report. max_threads is derived from
 * the registers (the driver's own figure is kwb_cuda_fn_attr's). */
typedef struct kwb_cuda_kernel_info {
    char name[256];
    int32_t registers, spill_stores, spill_loads, stack, static_smem, max_threads;
} kwb_cuda_kernel_info;

/* NVRTC (device-only source -> cubin) and nvcc (.cu module with extern "C"
 * host launchers -> shared object). The content key covers the headers the
 * source includes from include_dirs. On KWB_ECOMPILE *log holds the
 * compiler's output (free with kwb_free). */
int kwb_cuda_compile(const kwb_cuda_build *b, kwb_cuda_module **out, char **log);
int kwb_cuda_nvcc(const kwb_cuda_build *b, kwb_cuda_module **out, char **log);
/* n builds (NVRTC, or nvcc where .nvcc is set) on up to `threads` threads; per build rcs[i], mods[i],
 * msgs[i] (error sentence) and logs[i] (compiler output), freed by the caller. */
int kwb_cuda_compile_many(const kwb_cuda_build *builds, uint32_t n, uint32_t threads,
                          kwb_cuda_module **mods, int *rcs, char **msgs, char **logs);
/* The same n builds in the background: copies them, returns at once, and
 * compiles them on up to `threads` threads of a detached job into their build
 * directories, so that a later kwb_cuda_compile (in this process or another
 * sharing the directory) of the same build finds it there. Failures leave
 * nothing behind (the later compile reports them). kwb_cuda_prebuilds_running:
 * the jobs not yet finished. */
int kwb_cuda_prebuild(const kwb_cuda_build *builds, uint32_t n, uint32_t threads);
int kwb_cuda_prebuilds_running(void);
void kwb_cuda_module_free(kwb_cuda_module *m);
const char *kwb_cuda_module_hash(const kwb_cuda_module *m);
const char *kwb_cuda_module_arch(const kwb_cuda_module *m);
const char *kwb_cuda_module_log(const kwb_cuda_module *m);
const char *kwb_cuda_module_ptx(const kwb_cuda_module *m);
const char *kwb_cuda_module_path(const kwb_cuda_module *m);
int kwb_cuda_module_cached(const kwb_cuda_module *m);
const void *kwb_cuda_module_image(const kwb_cuda_module *m, size_t *len);
uint32_t kwb_cuda_module_nkernels(const kwb_cuda_module *m);
const kwb_cuda_kernel_info *kwb_cuda_module_kernel(const kwb_cuda_module *m, uint32_t i);

/* A kernel (NVRTC module) or a host launcher (nvcc module) ready to launch.
 * A launcher is `extern "C" int name(void **args, cudaStream_t stream)`:
 * args[i] points at argument i, as cuLaunchKernel's kernelParams. */
kwb_cuda_fn *kwb_cuda_fn_get(kwb_cuda_module *m, const char *name);
void kwb_cuda_fn_free(kwb_cuda_fn *f);
int kwb_cuda_fn_is_launcher(const kwb_cuda_fn *f);
/* Parameter layout from the kernel itself (cuFuncGetParamInfo); -1 if the
 * driver cannot tell. */
int32_t kwb_cuda_fn_nparams(const kwb_cuda_fn *f);
int kwb_cuda_fn_param(const kwb_cuda_fn *f, uint32_t i, uint32_t *offset, uint32_t *size);
/* A driver function attribute (CU_FUNC_ATTRIBUTE_*). */
int kwb_cuda_fn_attr(const kwb_cuda_fn *f, int attr, int32_t *value);

/* Device buffers. dtype is a kwb_dtype or a kwb_cuda_dtype; e2m1 packs two
 * elements a byte, low nibble first. */
kwb_cuda_buffer *kwb_cuda_buffer_new(int dtype, uint64_t n);   /* NULL on failure */
void kwb_cuda_buffer_free(kwb_cuda_buffer *b);
uint64_t kwb_cuda_buffer_ptr(const kwb_cuda_buffer *b);
uint64_t kwb_cuda_buffer_len(const kwb_cuda_buffer *b);
int kwb_cuda_buffer_dtype(const kwb_cuda_buffer *b);
size_t kwb_cuda_buffer_bytes(const kwb_cuda_buffer *b);
const char *kwb_cuda_dtype_name(int dtype);
int kwb_cuda_dtype_from_name(const char *name);   /* -1 if unknown */
/* The same values as the host fills for the same (seed, i) (uniform: bit
 * for bit; normal: to the last bit of the device's libm). */
int kwb_cuda_buffer_fill_uniform(kwb_cuda_buffer *b, uint64_t seed, double lo, double hi);
int kwb_cuda_buffer_fill_normal(kwb_cuda_buffer *b, uint64_t seed, double mean, double stdev);
int kwb_cuda_buffer_fill_value(kwb_cuda_buffer *b, double v);
/* Normal values of another stream, the same distribution, single-precision
 * math (the timed runs' fresh inputs: as fast as the memory). */
int kwb_cuda_buffer_fill_normal_stream(kwb_cuda_buffer *b, uint64_t seed, double mean, double stdev);
int kwb_cuda_buffer_poison(kwb_cuda_buffer *b);
int kwb_cuda_buffer_poison_enqueue(kwb_cuda_buffer *b);   /* queued, no wait */
int kwb_cuda_buffer_zero(kwb_cuda_buffer *b);
int kwb_cuda_buffer_upload(kwb_cuda_buffer *b, const void *src, size_t bytes);
int kwb_cuda_buffer_download(const kwb_cuda_buffer *b, void *dst, size_t bytes);
int kwb_cuda_buffer_copy(kwb_cuda_buffer *dst, const kwb_cuda_buffer *src);
/* Page-locked host memory, for copies of device buffers kept off the device
 * (the expected outputs while a candidate runs). */
kwb_cuda_pinned *kwb_cuda_pinned_new(size_t bytes);   /* NULL on failure */
void kwb_cuda_pinned_free(kwb_cuda_pinned *h);
size_t kwb_cuda_pinned_bytes(const kwb_cuda_pinned *h);
int kwb_cuda_buffer_save(const kwb_cuda_buffer *b, kwb_cuda_pinned *h);   /* device -> host, same size */
int kwb_cuda_buffer_load(kwb_cuda_buffer *b, const kwb_cuda_pinned *h);   /* host -> device */
/* A 64-bit content checksum computed on the device; kwb_cuda_checksum_host
 * gives the same value for the same bytes on the CPU. */
int kwb_cuda_buffer_checksum(const kwb_cuda_buffer *b, uint64_t *sum);
/* A keyed digest of the bytes (the key stays on the host). */
int kwb_cuda_buffer_digest(const kwb_cuda_buffer *b, uint64_t key, uint64_t *sum);
/* The same device work, queued, nothing read back (a run not checked). */
int kwb_cuda_buffer_digest_queue(const kwb_cuda_buffer *b, uint64_t key);
/* The elements still holding the poison pattern: their count, the first (-1: none). */
int kwb_cuda_buffer_poisoned(const kwb_cuda_buffer *b, uint64_t *count, int64_t *first);
/* Every device buffer lies between guard bands of drawn bytes (4 KB before,
 * at least 4 KB after): *hit is 1 when a byte of them changed since the last
 * check, with the first and last byte offsets that did, relative to the
 * buffer's first byte (negative: before it); the bands are filled again. */
int kwb_cuda_buffer_redzone(kwb_cuda_buffer *b, int *hit, int64_t *first, int64_t *last);
/* The guard bands of a device buffer of `bytes`: bytes before and after its
 * data, and the allocation's size (no device needed). */
void kwb_cuda_guard_layout(size_t bytes, uint64_t *before, uint64_t *after, size_t *alloc);
/* The same for n buffers in one launch: hit[i], first[i], last[i]. */
int kwb_cuda_buffers_redzone(kwb_cuda_buffer *const *bufs, uint32_t n, int *hit, int64_t *first, int64_t *last);
/* Those n buffers' guard bands and, for m outputs, the elements still poison
 * (count[j], pfirst[j]: -1 for none), in one launch and one wait. */
int kwb_cuda_buffers_check(kwb_cuda_buffer *const *bufs, uint32_t n, kwb_cuda_buffer *const *outs, uint32_t m,
                           int *hit, int64_t *first, int64_t *last, uint64_t *count, int64_t *pfirst);
uint64_t kwb_cuda_checksum_host(const void *data, size_t bytes);
/* Compare on the device (worst is not computed there: -1). */
int kwb_cuda_compare(const kwb_cuda_buffer *out, const kwb_cuda_buffer *ref, double atol,
                     double rtol, kwb_diff *d);

/* Launch plans: kernels and launchers in order, run or timed as one unit on
 * the harness's stream. params is packed at the kernel's parameter offsets. */
typedef struct kwb_cuda_launch {
    kwb_cuda_fn *fn;
    uint32_t grid[3], block[3], cluster[3];   /* cluster {0,0,0}: none */
    uint32_t smem;                            /* dynamic shared memory bytes */
    const void *params;
    uint32_t params_len;
    const uint32_t *offsets;                  /* nargs offsets into params (launchers) */
    uint32_t nargs;
} kwb_cuda_launch;

/* A TMA tensor map (cuTensorMapEncodeTiled) into the 128 bytes at map
 * (64-byte aligned); the enums are the driver's CUtensorMap* values, dims
 * innermost first, strides in bytes (rank - 1 of them). */
int kwb_cuda_tensor_map_encode(void *map, int dtype, uint32_t rank, uint64_t address, const uint64_t *dims,
                               const uint64_t *strides, const uint32_t *box, const uint32_t *estrides,
                               int interleave, int swizzle, int l2, int oob);

kwb_cuda_plan *kwb_cuda_plan_new(void);
void kwb_cuda_plan_free(kwb_cuda_plan *p);
int kwb_cuda_plan_add(kwb_cuda_plan *p, const kwb_cuda_launch *l);

/* A plan step that is one cublasGemmEx on the plan's stream (so a graph of
 * the plan captures it): C = alpha * op(A) * op(B) + beta * C in cuBLAS's
 * column-major terms, op(A) m x k, op(B) k x n, C m x n; trans 0 is the
 * operand as stored (CUBLAS_OP_N), 1 transposed (CUBLAS_OP_T). Offsets and
 * leading dimensions count elements. A and B are both bf16, both f16 or
 * both f32; C is of their type or f32; the compute type is fp32
 * (CUBLAS_COMPUTE_32F). For row-major X [M, K] times row-major W [N, K]
 * transposed into row-major Y [M, N]: trans_a 1, trans_b 0, m N, n M, k K,
 * A W (lda K), B X (ldb K), C Y (ldc N). */
typedef struct kwb_cuda_gemm {
    int trans_a, trans_b;
    int32_t m, n, k;
    float alpha, beta;
    kwb_cuda_buffer *a, *b, *c;
    uint64_t a_offset, b_offset, c_offset;
    int32_t lda, ldb, ldc;
} kwb_cuda_gemm;

/* The gemm's shape against operands of these dtypes and lengths (elements;
 * [0] A, [1] B, [2] C): 0, or KWB_EINVAL naming what is wrong (a dimension
 * under 1, a leading dimension under its rows, an operand past its buffer's
 * end, types cuBLAS is not asked for here). Needs no device. */
int kwb_cuda_gemm_check(const kwb_cuda_gemm *g, const int dtype[3], const uint64_t len[3]);
/* Add a gemm step (checked as above with the buffers' own dtypes and
 * lengths). The plan's cuBLAS handle is made at its first gemm step, bound
 * to the harness stream with a workspace of its own (so a graph capture
 * allocates nothing), and destroyed with the plan. KWB_EINVAL for a bad
 * gemm; KWB_ERUN where cuBLAS cannot be loaded or started. */
int kwb_cuda_plan_add_gemm(kwb_cuda_plan *p, const kwb_cuda_gemm *g);
/* Run once and wait; a failure names the step and the CUDA error. */
int kwb_cuda_plan_run(kwb_cuda_plan *p);

typedef struct kwb_cuda_clocks {
    int32_t sm_mhz_before, sm_mhz_after, sm_mhz_max, temp_before, temp_after;
    uint64_t reasons_after;    /* NVML clock event reasons after sampling */
    int throttled;             /* thermal or power slowdown seen */
    int valid;                 /* 0 when NVML is missing */
} kwb_cuda_clocks;

/* Time a plan: warm-up, then the stop rule, each sample its own event pair
 * around a CUDA-graph replay (graph 0: plain launches); cold 1 writes a
 * flush buffer of twice the L2 before each sample. */
/* Buffers poisoned before every timed run of the plan (outside the timed
 * region, before the L2 flush), so a candidate cannot keep an earlier run's
 * output and skip its work. The buffers must outlive the plan's timing. */
int kwb_cuda_plan_poison_before(kwb_cuda_plan *p, kwb_cuda_buffer *const *bufs, uint32_t n);
/* One timed run of the plan as a CUDA graph (cold: L2 flushed and the flush
 * buffer written first, outside the timed region): its seconds. */
int kwb_cuda_plan_replay(kwb_cuda_plan *p, int cold, double *seconds);
int kwb_cuda_plan_time(kwb_cuda_plan *p, const kwb_time_opts *o, int cold, int graph,
                       kwb_stats *st, kwb_cuda_clocks *clk);
int kwb_cuda_clocks_read(int32_t *sm_mhz, int32_t *temp, uint64_t *reasons);

/* Ceilings for `kwb doctor`: seconds for the measured work. */
int kwb_cuda_measure_copy(uint64_t bytes, uint32_t reps, double *seconds);
int kwb_cuda_measure_fma(double *flops_per_s);
/* bf16 tensor-core rate: cuBLAS where present (*via = "cublas"), else, or
 * when own is 1, kwb's own WMMA kernel (*via = "kwb-wmma"). */
int kwb_cuda_measure_bf16(uint32_t n, int own, double *flops_per_s, const char **via);

#endif
