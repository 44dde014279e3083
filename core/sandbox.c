/* sandbox.c: a host candidate's own process. The judge (its caller) keeps
 * the reference, the expected outputs, the comparison and the clock; the
 * sandbox gets the candidate's module, its buffers (memfds, mapped between
 * guard pages of its own) and one socket. kwb.h says what each side may
 * rely on; docs/architecture.md why. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ffi.h>
#include <grp.h>
#include <link.h>
#include <linux/seccomp.h>
#include <elf.h>
#include <poll.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "error.h"
#include "host_ffi.h"
#include "kwb.h"
#include "timing.h"

enum { FD_CHAN = 3, FD_MODULE = 4, MAX_ARGS = 64, MAX_SLOTS = 4096 };
enum { OP_CALL = 1, OP_MAP, OP_UNMAP, OP_GO, OP_READY = 10, OP_DONE, OP_MAPPED, OP_FAIL, OP_SYSCALL, OP_LOADED };

/* One message either way (a SOCK_SEQPACKET record). */
typedef struct {
    uint32_t op, seq, nargs, slot;   /* CALL, MAP, UNMAP: slot 1 to be answered; MAPPED: nargs, how many are
                                        mapped; SYSCALL: slot, the number */
    uint64_t bytes, data_offset;     /* MAP: the memfd's size, where its data starts */
    int32_t status;                  /* FAIL: a code of the sandbox's (FAIL_...), never text */
    int32_t bufslot[MAX_ARGS];       /* CALL: -1 for a scalar, else the slot of the buffer */
    kwb_value args[MAX_ARGS], ret;
} sb_msg;

static size_t page_bytes(void) {
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096;
}

static int send_msg(int fd, const sb_msg *m, int pass_fd) {
    struct iovec iov = {(void *)m, sizeof *m};
    union { char buf[CMSG_SPACE(sizeof(int))]; struct cmsghdr align; } u;
    struct msghdr h = {.msg_iov = &iov, .msg_iovlen = 1};
    if (pass_fd >= 0) {
        h.msg_control = u.buf;
        h.msg_controllen = sizeof u.buf;
        struct cmsghdr *c = CMSG_FIRSTHDR(&h);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
    }
    ssize_t n;
    do n = sendmsg(fd, &h, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    return n == (ssize_t)sizeof *m ? 0 : -1;
}

/* 1 with a message (and *got_fd when one came with it), 2 for a record of
 * another size (not one of ours), 0 at the end, -1 on error. */
static int recv_msg(int fd, sb_msg *m, int *got_fd, int flags) {
    struct iovec iov = {m, sizeof *m};
    union { char buf[CMSG_SPACE(sizeof(int))]; struct cmsghdr align; } u;
    struct msghdr h = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
    ssize_t n;
    do n = recvmsg(fd, &h, flags | MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    if (got_fd) *got_fd = -1;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&h); c; c = CMSG_NXTHDR(&h, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            int f;
            memcpy(&f, CMSG_DATA(c), sizeof f);
            if (got_fd && *got_fd < 0) *got_fd = f;
            else close(f);
        }
    if (n == 0) return 0;
    if (n < 0) return -1;
    return n == (ssize_t)sizeof *m ? 1 : 2;   /* 2: a record of another size, ignored */
}

/* ==== the sandbox's side ================================================= */

/* Candidate code (the module's initialisers, then the calls) runs on the
 * sandbox's one thread, and only under the strict filter: the module is
 * loaded with its initialisers taken out (kwb_sandbox_start), the filter
 * goes on, and only then does the sandbox call them itself. */
static void on_sigsys(int sig, siginfo_t *si, void *uc) {
    (void)sig; (void)uc;
    static sb_msg m;   /* a handler's message: static, not on a stack the kernel may have spoiled */
    m.op = OP_SYSCALL;
    m.slot = (uint32_t)si->si_syscall;
    send_msg(FD_CHAN, &m, -1);
    syscall(SYS_exit_group, 111);
}

#define ALLOW(name, ...) rc |= seccomp_rule_add(f, SCMP_ACT_ALLOW, SCMP_SYS(name), __VA_ARGS__)

/* What any candidate code may do: memory, the clock, writes to stdout and
 * stderr. */
static int allow_common(scmp_filter_ctx f) {
    int rc = 0;
    ALLOW(write, 1, SCMP_A0(SCMP_CMP_EQ, 1));
    ALLOW(write, 1, SCMP_A0(SCMP_CMP_EQ, 2));
    ALLOW(fstat, 0);
    ALLOW(newfstatat, 1, SCMP_A3(SCMP_CMP_EQ, AT_EMPTY_PATH));
    ALLOW(ioctl, 2, SCMP_A0(SCMP_CMP_LE, 2), SCMP_A1(SCMP_CMP_EQ, TCGETS));
    ALLOW(mmap, 1, SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));
    ALLOW(mprotect, 1, SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));
    ALLOW(munmap, 0);
    /* resizing in place only: a moved or doubled mapping (MREMAP_MAYMOVE,
     * an old size of 0) would keep a buffer's pages after the judge unmaps
     * it. Refused with ENOMEM, not trapped: the C library's realloc then
     * copies instead. */
    ALLOW(mremap, 1, SCMP_A3(SCMP_CMP_EQ, 0));
    rc |= seccomp_rule_add(f, SCMP_ACT_ERRNO(ENOMEM), SCMP_SYS(mremap), 1, SCMP_A3(SCMP_CMP_NE, 0));
    ALLOW(brk, 0);
    ALLOW(madvise, 0);
    ALLOW(close, 0);
    ALLOW(getrandom, 0);
    ALLOW(clock_gettime, 0);
    ALLOW(clock_getres, 0);
    ALLOW(gettimeofday, 0);
    ALLOW(time, 0);
    ALLOW(getpid, 0);
    ALLOW(gettid, 0);
    ALLOW(sched_yield, 0);
    ALLOW(exit, 0);
    ALLOW(exit_group, 0);
    return rc;
}

/* The calls (the strict filter): the above and the messages of the protocol
 * on fd 3. */
static int allow_running(scmp_filter_ctx f) {
    int rc = allow_common(f);
    ALLOW(recvmsg, 1, SCMP_A0(SCMP_CMP_EQ, FD_CHAN));
    ALLOW(sendmsg, 1, SCMP_A0(SCMP_CMP_EQ, FD_CHAN));
    return rc;
}

/* While the system's libraries and the module load (no candidate code runs
 * then: the judge took the module's initialisers out, kwb_sandbox_start):
 * reading files, mapping them executable, the loader's calls; never
 * writing, creating or starting anything. */
static int allow_loading(scmp_filter_ctx f) {
    int rc = allow_running(f);
    int writes = O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | O_APPEND;
    ALLOW(openat, 1, SCMP_A2(SCMP_CMP_MASKED_EQ, (scmp_datum_t)writes, 0));
    ALLOW(read, 0);
    ALLOW(pread64, 0);
    ALLOW(lseek, 0);
    ALLOW(newfstatat, 0);
    ALLOW(mmap, 0);
    ALLOW(mprotect, 0);
    ALLOW(seccomp, 0);   /* the next filter */
    ALLOW(futex, 0);
    ALLOW(rt_sigprocmask, 0);
    return rc;
}
#undef ALLOW

enum { F_LOADING, F_RUNNING };

static int load_filter(int which) {
    scmp_filter_ctx f = seccomp_init(SCMP_ACT_TRAP);
    if (!f) return -1;
    /* no new privileges was set before exec (kwb_sandbox_start): no prctl here */
    int rc = seccomp_attr_set(f, SCMP_FLTATR_CTL_NNP, 0);
    if (rc == 0) {
        switch (which) {
        case F_LOADING: rc = allow_loading(f); break;
        default: rc = allow_running(f); break;
        }
    }
    if (rc == 0) rc = seccomp_load(f);
    seccomp_release(f);
    return rc;
}

/* A failure the sandbox's own code reports: a code from this list, never
 * text (the judge says it in its own words, fail_text). */
enum { FAIL_FILTER = 1, FAIL_LOAD, FAIL_SYMBOL, FAIL_FFI, FAIL_MAP };

static void child_fail(int code) {
    sb_msg m = {.op = OP_FAIL, .status = code};
    send_msg(FD_CHAN, &m, -1);
}

/* The buffers mapped in the sandbox: those of the calls at hand, no others
 * (the judge sends UNMAP before calls that do not use them all). A slot is
 * the buffer's whole mapping (its guard pages too) and where its data starts. */
static struct { unsigned char *base; size_t bytes; void *data; } slots[MAX_SLOTS];
static uint32_t used;

static void unmap_all(void) {
    for (uint32_t i = 0; i < used; i++) munmap(slots[i].base, slots[i].bytes);
    memset(slots, 0, used * sizeof *slots);
    used = 0;
}

/* MAP: the memfd between guard pages of the sandbox's own, in the next slot. */
static int map_one(const sb_msg *m, int fd, size_t page) {
    size_t bytes = m->bytes + 2 * page;
    unsigned char *base = used == MAX_SLOTS ? MAP_FAILED
                          : mmap(NULL, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (fd < 0 || base == MAP_FAILED ||
        mmap(base + page, m->bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) == MAP_FAILED)
        return -1;
    slots[used].base = base;
    slots[used].bytes = bytes;
    slots[used++].data = base + page + m->data_offset;
    return 0;
}

/* The module's initialisers, as the judge found them (kwb_sandbox_start):
 * addresses relative to the load base. */
typedef struct {
    uintptr_t base, init, array, count;
    int argc;
    char **argv;
} sb_inits;

typedef void (*init_fn)(int, char **, char **);

/* Call them, in the dynamic loader's order (DT_INIT, then DT_INIT_ARRAY),
 * with its arguments: under the strict filter, on the caller's limit. */
static void initialise(const sb_inits *in) {
    char *no_env[] = {NULL};
    if (in->init) ((init_fn)(in->base + in->init))(in->argc, in->argv, no_env);
    init_fn *array = (init_fn *)(in->base + in->array);
    for (uintptr_t i = 0; in->array && i < in->count; i++) array[i](in->argc, in->argv, no_env);
}

/* argv: kwb --sandbox-child SYMBOL SIG INIT INIT_ARRAY COUNT [NEEDED...]
 * (hex addresses; NEEDED: the module's libraries, loaded first). */
int kwb_sandbox_main(int argc, char **argv) {
    if (argc < 7) {
        fprintf(stderr, "kwb: --sandbox-child is started by kwb itself, with a module on fd 4 and a channel on fd 3\n");
        return 2;
    }
    const char *symbol = argv[2], *sig = argv[3];
    static sb_inits in;
    in.init = (uintptr_t)strtoull(argv[4], NULL, 16);
    in.array = (uintptr_t)strtoull(argv[5], NULL, 16);
    in.count = (uintptr_t)strtoull(argv[6], NULL, 16);
    in.argc = argc;
    in.argv = argv;
    struct sigaction sa = {.sa_sigaction = on_sigsys, .sa_flags = SA_SIGINFO};
    sigaction(SIGSYS, &sa, NULL);
    if (load_filter(F_LOADING) != 0) { child_fail(FAIL_FILTER); return 1; }
    /* the module's libraries first, on their own: their relocations and
     * constructors (the system's code) see none of the module's symbols */
    for (int i = 7; i < argc; i++)
        if (!dlopen(argv[i], RTLD_NOW | RTLD_LOCAL)) { child_fail(FAIL_LOAD); return 1; }
    void *h = dlopen("/proc/self/fd/4", RTLD_NOW | RTLD_LOCAL);
    struct link_map *lm = NULL;
    if (!h || dlinfo(h, RTLD_DI_LINKMAP, &lm) != 0) { child_fail(FAIL_LOAD); return 1; }
    close(FD_MODULE);
    in.base = lm->l_addr;
    dlerror();
    void *fn = dlsym(h, symbol);
    if (!fn) { child_fail(FAIL_SYMBOL); return 1; }
    size_t nargs = strlen(sig) - 1;
    kwb_ctype ret = (kwb_ctype)(sig[0] - '0'), types[MAX_ARGS];
    ffi_type *ftypes[MAX_ARGS];
    ffi_cif cif;
    for (size_t i = 0; i < nargs && i < MAX_ARGS; i++) {
        types[i] = (kwb_ctype)(sig[i + 1] - '0');
        ftypes[i] = kwb_host_ffi_type(types[i]);
    }
    if (nargs > MAX_ARGS || ffi_prep_cif(&cif, FFI_DEFAULT_ABI, (unsigned)nargs, kwb_host_ffi_type(ret), ftypes) != FFI_OK) {
        child_fail(FAIL_FFI);
        return 1;
    }
    /* from here on candidate code may run: the strict filter first (stacked
     * on the loading one, which allowed this one call of seccomp's) */
    if (load_filter(F_RUNNING) != 0) { child_fail(FAIL_FILTER); return 1; }
    /* loaded: the judge reads its clock while it sleeps here, then says go,
     * and the initialisers' time is counted from there */
    static sb_msg m;
    m = (sb_msg){.op = OP_LOADED};
    if (send_msg(FD_CHAN, &m, -1)) return 1;
    if (recv_msg(FD_CHAN, &m, NULL, 0) != 1 || m.op != OP_GO) return 1;
    initialise(&in);
    m = (sb_msg){.op = OP_READY};
    if (send_msg(FD_CHAN, &m, -1)) return 1;
    size_t page = page_bytes();
    for (;;) {
        int fd = -1;
        int got = recv_msg(FD_CHAN, &m, &fd, 0);
        if (got <= 0) return 0;   /* the judge hung up */
        if (m.op == OP_MAP || m.op == OP_UNMAP) {
            if (m.op == OP_UNMAP) unmap_all();
            else if (map_one(&m, fd, page)) {
                child_fail(FAIL_MAP);
                return 1;
            }
            if (fd >= 0) close(fd);   /* the mapping keeps the memory: no descriptor outlives it */
            if (!m.slot) continue;    /* the last of a set is answered */
            m.op = OP_MAPPED;
            m.nargs = used;
            if (send_msg(FD_CHAN, &m, -1)) return 1;
        } else if (m.op == OP_CALL) {
            if (fd >= 0) close(fd);
            void *values[MAX_ARGS];
            for (size_t i = 0; i < nargs; i++) {
                if (types[i] == KWB_C_PTR && m.bufslot[i] >= 0)
                    m.args[i].ptr = (uint32_t)m.bufslot[i] < used ? slots[m.bufslot[i]].data : NULL;
                values[i] = &m.args[i];
            }
            kwb_value r;
            kwb_host_ffi_call(&cif, fn, ret, values, &r);
            if (!m.slot) continue;   /* one of several queued calls: only the last is answered */
            m.op = OP_DONE;
            m.ret = r;
            if (send_msg(FD_CHAN, &m, -1)) return 1;
        } else {
            if (fd >= 0) close(fd);
        }
    }
}

/* ==== the judge's side ==================================================== */


/* ---- the module as the sandbox loads it --------------------------------- */

#if defined(__x86_64__)
#define SB_MACHINE EM_X86_64
#define SB_IRELATIVE R_X86_64_IRELATIVE
#elif defined(__aarch64__)
#define SB_MACHINE EM_AARCH64
#define SB_IRELATIVE R_AARCH64_IRELATIVE
#endif

enum { MAX_NEEDED = 32, MAX_MODULE = 256 << 20 };

/* A candidate's module made ready for a sandbox: a sealed copy (a memfd)
 * with its initialisers' entries taken out of the dynamic section, so the
 * dynamic loader runs none of its code; the sandbox runs them itself under
 * its filter. */
typedef struct {
    int fd;
    uint64_t init, array, count;     /* DT_INIT, DT_INIT_ARRAY and its length, relative to the load base */
    const char *needed[MAX_NEEDED];  /* its libraries by name (in text, the copy's string table) */
    int nneeded;
    unsigned char *text;
    char why[200];                   /* a module refused: why */
} sb_module;

static unsigned char *file_at(const sb_module *mod, size_t size, uint64_t off, uint64_t len) {
    return off <= size && len <= size - off ? mod->text + off : NULL;
}

/* The bytes at address a (len of them) in the file, through its PT_LOAD segments. */
static unsigned char *addr_at(const sb_module *mod, size_t size, const Elf64_Phdr *ph, int phnum, uint64_t a,
                              uint64_t len) {
    for (int i = 0; i < phnum; i++)
        if (ph[i].p_type == PT_LOAD && a >= ph[i].p_vaddr && a - ph[i].p_vaddr <= ph[i].p_filesz &&
            len <= ph[i].p_filesz - (a - ph[i].p_vaddr))
            return file_at(mod, size, ph[i].p_offset + (a - ph[i].p_vaddr), len);
    return NULL;
}

static int refuse(sb_module *mod, const char *why) {
    snprintf(mod->why, sizeof mod->why, "%s", why);
    return 1;
}

/* Code the dynamic loader would run while it loads the module, other than
 * the initialisers (taken out): indirect functions (ifunc), whose resolvers
 * it calls for their relocations and dlsym. 1 (mod->why) when there is. */
static int runs_code_when_loaded(sb_module *mod, size_t size, const Elf64_Ehdr *eh) {
    if (!eh->e_shnum || eh->e_shentsize != sizeof(Elf64_Shdr)) return refuse(mod, "the module has no section headers");
    const Elf64_Shdr *sh = (const Elf64_Shdr *)file_at(mod, size, eh->e_shoff, (uint64_t)eh->e_shnum * sizeof *sh);
    if (!sh) return refuse(mod, "the module's section headers lie outside it");
    for (int i = 0; i < eh->e_shnum; i++) {
        if (sh[i].sh_type != SHT_DYNSYM && sh[i].sh_type != SHT_RELA) continue;
        const unsigned char *p = file_at(mod, size, sh[i].sh_offset, sh[i].sh_size);
        if (!p) return refuse(mod, "a section of the module lies outside it");
        if (sh[i].sh_type == SHT_DYNSYM) {
            for (uint64_t k = 0; k + sizeof(Elf64_Sym) <= sh[i].sh_size; k += sizeof(Elf64_Sym)) {
                const Elf64_Sym *y = (const Elf64_Sym *)(p + k);
                if (ELF64_ST_TYPE(y->st_info) == STT_GNU_IFUNC && y->st_shndx != SHN_UNDEF) goto ifunc;
            }
        } else {
            for (uint64_t k = 0; k + sizeof(Elf64_Rela) <= sh[i].sh_size; k += sizeof(Elf64_Rela))
                if (ELF64_R_TYPE(((const Elf64_Rela *)(p + k))->r_info) == SB_IRELATIVE) goto ifunc;
        }
    }
    return 0;
ifunc:
    return refuse(mod, "the module has an indirect function (ifunc), whose resolver the dynamic loader would run "
                       "before the sandbox's system call filter");
}

/* Read the module at path and make its sandbox copy: 0, 1 when the module
 * is refused (mod->why, the candidate's doing), or a status. */
static int module_prepare(const char *path, sb_module *mod) {
    *mod = (sb_module){.fd = -1};
    int f = open(path, O_RDONLY | O_CLOEXEC);
    if (f < 0) return kwb_fail(KWB_EIO, "cannot open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(f, &st) != 0 || st.st_size < (off_t)sizeof(Elf64_Ehdr) || st.st_size > MAX_MODULE) {
        close(f);
        return kwb_fail(KWB_EIO, "%s is not a module a sandbox loads (%lld bytes)", path, (long long)st.st_size);
    }
    size_t size = (size_t)st.st_size;
    mod->text = malloc(size);
    ssize_t n = mod->text ? pread(f, mod->text, size, 0) : -1;
    close(f);
    if (n != (ssize_t)size) return kwb_fail(KWB_EIO, "cannot read %s", path);
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)mod->text;
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
        eh->e_ident[EI_DATA] != ELFDATA2LSB || eh->e_type != ET_DYN || eh->e_machine != SB_MACHINE ||
        eh->e_phentsize != sizeof(Elf64_Phdr))
        return refuse(mod, "the module is not a shared object of this machine");
    const Elf64_Phdr *ph = (const Elf64_Phdr *)file_at(mod, size, eh->e_phoff, (uint64_t)eh->e_phnum * sizeof *ph);
    if (!ph) return refuse(mod, "the module's program headers lie outside it");
    Elf64_Dyn *dyn = NULL;
    size_t ndyn = 0;
    for (int i = 0; i < eh->e_phnum; i++)
        if (ph[i].p_type == PT_DYNAMIC) {
            dyn = (Elf64_Dyn *)file_at(mod, size, ph[i].p_offset, ph[i].p_filesz);
            ndyn = ph[i].p_filesz / sizeof *dyn;
        }
    if (!dyn) return refuse(mod, "the module has no dynamic section");
    if (runs_code_when_loaded(mod, size, eh)) return 1;
    uint64_t strtab = 0, strsz = 0, arraysz = 0, needed[MAX_NEEDED];
    size_t kept = 0, i;
    for (i = 0; i < ndyn && dyn[i].d_tag != DT_NULL; i++) {
        switch (dyn[i].d_tag) {
        case DT_INIT: mod->init = dyn[i].d_un.d_ptr; continue;
        case DT_INIT_ARRAY: mod->array = dyn[i].d_un.d_ptr; continue;
        case DT_INIT_ARRAYSZ: arraysz = dyn[i].d_un.d_val; continue;
        case DT_PREINIT_ARRAY: case DT_PREINIT_ARRAYSZ: continue;   /* (the loader runs a program's only) */
        case DT_STRTAB: strtab = dyn[i].d_un.d_ptr; break;
        case DT_STRSZ: strsz = dyn[i].d_un.d_val; break;
        case DT_NEEDED:
            if (mod->nneeded == MAX_NEEDED) return refuse(mod, "the module needs too many libraries");
            needed[mod->nneeded++] = dyn[i].d_un.d_val;
            break;
        }
        dyn[kept++] = dyn[i];   /* the rest kept in order; the freed entries end the section */
    }
    for (; kept < i; kept++) dyn[kept] = (Elf64_Dyn){.d_tag = DT_NULL};
    if (arraysz % sizeof(uint64_t)) return refuse(mod, "the module's initialiser array has a partial entry");
    mod->count = arraysz / sizeof(uint64_t);
    const char *names = (const char *)addr_at(mod, size, ph, eh->e_phnum, strtab, strsz);
    for (int k = 0; k < mod->nneeded; k++) {
        const char *name = names && needed[k] < strsz ? names + needed[k] : NULL;
        if (!name || !memchr(name, 0, strsz - needed[k]) || strchr(name, '/') || !*name)
            return refuse(mod, "the module names a library by a path, or by no name the sandbox can load");
        mod->needed[k] = name;
    }
    /* the copy: sealed, so what the sandbox maps is what was checked here */
    mod->fd = memfd_create("kwb-module", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (mod->fd < 0) return kwb_fail(KWB_EIO, "cannot make the module's copy: %s", strerror(errno));
    for (size_t done = 0; done < size;) {
        ssize_t w = write(mod->fd, mod->text + done, size - done);
        if (w <= 0) return kwb_fail(KWB_EIO, "cannot write the module's copy: %s", strerror(errno));
        done += (size_t)w;
    }
    if (fcntl(mod->fd, F_ADD_SEALS, F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE) != 0)
        return kwb_fail(KWB_EIO, "cannot seal the module's copy: %s", strerror(errno));
    return 0;
}

static void module_free(sb_module *mod) {
    if (mod->fd >= 0) close(mod->fd);
    free(mod->text);
}

struct kwb_sandbox {
    pid_t pid;
    int chan, status_fd, alive;
    clockid_t clock;
    uint32_t nargs, seq;
    kwb_ctype args[MAX_ARGS];
    double cpu_end;                  /* its CPU clock when it last fell asleep */
    unsigned long nvcsw;             /* its voluntary context switches then */
    uint64_t *mapped;                /* the serials of the buffers mapped there, by slot */
    uint32_t nmapped;
    char forbidden[120];             /* the system call it was stopped at, when one */
    cpu_set_t judge_cpus;            /* the caller's processors before the sandbox */
    int pinned;
    uid_t uid;                       /* the sandbox's */
    int borrowed;                    /* its uid is the caller's saved one (kill_sandbox) */
    int hidden;                      /* counted in live_sandboxes (judge_hide) */
};

static double cpu_now(const kwb_sandbox *s) {
    struct timespec ts;
    if (clock_gettime(s->clock, &ts) != 0) return -1;
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Its scheduler state ('S' asleep, 'R' running, ...) and voluntary context
 * switches, from /proc/PID/status; 0 when it is gone. */
static char proc_state(const kwb_sandbox *s, unsigned long *nvcsw) {
    char buf[4096];
    ssize_t n = pread(s->status_fd, buf, sizeof buf - 1, 0);
    if (n <= 0) return 0;
    buf[n] = 0;
    const char *st = strstr(buf, "\nState:"), *v = strstr(buf, "\nvoluntary_ctxt_switches:");
    if (!st || !v) return 0;
    st += 7;
    while (*st == ' ' || *st == '\t') st++;
    *nvcsw = strtoul(v + 25, NULL, 10);
    return *st;
}

static void reap(kwb_sandbox *s, kwb_sandbox_result *r) {
    int st = 0;
    pid_t w;
    do w = waitpid(s->pid, &st, 0);
    while (w < 0 && errno == EINTR);
    s->alive = 0;
    if (!r) return;
    if (s->forbidden[0]) {
        r->outcome = KWB_SANDBOX_FORBIDDEN;
        snprintf(r->detail, sizeof r->detail, "%s", s->forbidden);
    } else if (r->outcome == KWB_SANDBOX_TIMEOUT) {
        return;
    } else {
        r->outcome = KWB_SANDBOX_CRASHED;
        if (w < 0) snprintf(r->detail, sizeof r->detail, "its process ended");
        else if (WIFSIGNALED(st)) {
            const char *abbrev = sigabbrev_np(WTERMSIG(st)), *text = sigdescr_np(WTERMSIG(st));
            snprintf(r->detail, sizeof r->detail, "died of SIG%s (%s)", abbrev ? abbrev : "?", text ? text : "?");
        } else snprintf(r->detail, sizeof r->detail, "exited with status %d", WEXITSTATUS(st));
    }
}

static void kill_sandbox(const kwb_sandbox *s);

static void end(kwb_sandbox *s, kwb_sandbox_result *r) {
    if (!s->alive) return;
    kill_sandbox(s);
    reap(s, r);
}

static void note_syscall(kwb_sandbox *s, uint32_t nr) {
    char *name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, (int)nr);
    snprintf(s->forbidden, sizeof s->forbidden, "system call %s (number %u), which the sandbox does not allow",
             name ? name : "?", nr);
    free(name);
}

/* A failure the sandbox reports, in the judge's words. */
static const char *fail_text(int code) {
    switch (code) {
    case FAIL_FILTER: return "the sandbox cannot load its system call filter";
    case FAIL_LOAD: return "the module does not load (the dynamic loader refused it)";
    case FAIL_SYMBOL: return "no function of that name in the module";
    case FAIL_FFI: return "libffi cannot describe the function";
    case FAIL_MAP: return "the sandbox cannot map a buffer";
    default: return "the sandbox failed";
    }
}

/* Whether a failure record is one the sandbox's own code sends while the
 * judge waits for want: any other (a candidate's forgery) is ignored. */
static int fail_expected(uint32_t want, int code) {
    if (want == OP_LOADED) return code == FAIL_FILTER || code == FAIL_LOAD || code == FAIL_SYMBOL || code == FAIL_FFI;
    if (want == OP_MAPPED) return code == FAIL_MAP;
    return 0;
}

/* Wait for the reply to seq (op want): 0, or 1 when the sandbox ended or
 * passed the limit (r says which; the process is reaped). */
static int await(kwb_sandbox *s, uint32_t seq, uint32_t want, double c0, double limit_s, sb_msg *m,
                 kwb_sandbox_result *r, int *got_fd) {
    double t0 = kwb_now(), wall_limit = 3 * limit_s + 5;
    for (;;) {
        struct pollfd p = {s->chan, POLLIN, 0};   /* asleep: the sandbox runs on this processor */
        int n = poll(&p, 1, 20);
        if (n > 0 && (p.revents & POLLIN)) {
            int got = recv_msg(s->chan, m, got_fd, MSG_DONTWAIT);
            if (got == 1 && m->op == OP_SYSCALL) note_syscall(s, m->slot);
            else if (got == 1 && m->op == want && m->seq == seq) return 0;
            else if (got == 1 && m->op == OP_FAIL && fail_expected(want, m->status)) {
                r->outcome = KWB_SANDBOX_CRASHED;
                snprintf(r->detail, sizeof r->detail, "%s", fail_text(m->status));
                end(s, NULL);
                return 1;
            }
            if (got == 0 || (got < 0 && errno != EAGAIN)) { end(s, r); return 1; }
            if (got_fd && *got_fd >= 0) { close(*got_fd); *got_fd = -1; }
            continue;
        }
        if (n > 0 && (p.revents & (POLLHUP | POLLERR))) { end(s, r); return 1; }
        double cpu = cpu_now(s);
        if ((cpu >= 0 && cpu - c0 > limit_s) || kwb_now() - t0 > wall_limit) {
            r->outcome = KWB_SANDBOX_TIMEOUT;
            snprintf(r->detail, sizeof r->detail, "past its limit of %g s", limit_s);
            end(s, r);
            return 1;
        }
    }
}

/* After a reply: wait until the sandbox sleeps again (it switched out since
 * its last sleep and is asleep now), then read its CPU clock, exact once it
 * is off the processor. 0, or 1 when it ended or passed the limit. */
static int settle(kwb_sandbox *s, double c0, double limit_s, double *cpu, kwb_sandbox_result *r) {
    double t0 = kwb_now();
    for (int spin = 0;; spin++) {
        unsigned long v = 0;
        char st = proc_state(s, &v);
        if (!st || st == 'Z' || st == 'X') { end(s, r); return 1; }
        if (st == 'S' && v > s->nvcsw) {
            *cpu = cpu_now(s);
            unsigned long v2 = 0;
            if (proc_state(s, &v2) == 'S' && v2 == v) {   /* still the same sleep: the reading is of it */
                s->nvcsw = v;
                return 0;
            }
            continue;
        }
        double now_cpu = cpu_now(s);
        if (now_cpu - c0 > limit_s || kwb_now() - t0 > 3 * limit_s + 5) {
            r->outcome = KWB_SANDBOX_TIMEOUT;
            snprintf(r->detail, sizeof r->detail, "past its limit of %g s", limit_s);
            end(s, r);
            return 1;
        }
        if (spin < 200) sched_yield();
        else {
            struct timespec ts = {0, 50000};
            nanosleep(&ts, NULL);
        }
    }
}

/* The judge is not dumpable while any sandbox of its lives: its memory
 * (/proc/PID/mem) and its other /proc entries are not open to a process of
 * its uid. Its own setting comes back with the last sandbox's end. */
static int live_sandboxes, judge_dumpable;

static void judge_hide(void) {
    if (live_sandboxes++ == 0) judge_dumpable = prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
}

static void judge_show(void) {
    if (--live_sandboxes == 0 && judge_dumpable > 0) prctl(PR_SET_DUMPABLE, judge_dumpable, 0, 0, 0);
}

/* The uid a sandbox runs as: 65534 when the caller is root; the caller's
 * saved set-user-ID where it differs from its real and effective uids (a
 * host worker of a pool run by root carries its sandboxes' uid there:
 * kwb_sandbox_take_uid); else the caller's own, for want of any other. */
static uid_t sandbox_uid(int *borrowed) {
    uid_t r, e, saved;
    *borrowed = 0;
    if (getresuid(&r, &e, &saved) != 0) return geteuid();
    if (e == 0) return 65534;
    if (saved != r && saved != e) { *borrowed = 1; return saved; }
    return e;
}

int kwb_sandbox_take_uid(void) {
    uid_t r, e, saved;
    if (getresuid(&r, &e, &saved) != 0 || r == e || r == 0 || e == 0) return 0;
    /* started with its sandboxes' uid as the real one (exec keeps the real
     * uid, not the saved one): that becomes the saved one, its own uid the
     * real and effective. The C library's secure mode, which such a start
     * sets, took TMPDIR away; it comes back from TMP. */
    if (setresuid(e, e, r) != 0) return -1;
    const char *tmp = getenv("TMP");
    if (tmp && !getenv("TMPDIR")) setenv("TMPDIR", tmp, 1);
    return 1;
}

/* SIGKILL to the sandbox. One of a borrowed uid is signalled with that uid
 * as this thread's effective one, for the kill alone (the system call, not
 * the C library's wrapper, which would change every thread's); changing it
 * clears this thread's parent-death signal, set again after. */
static void kill_sandbox(const kwb_sandbox *s) {
    if (!s->borrowed) { kill(s->pid, SIGKILL); return; }
    int pdeath = 0;
    prctl(PR_GET_PDEATHSIG, &pdeath, 0, 0, 0);
    uid_t me = geteuid();
    syscall(SYS_setresuid, -1, s->uid, -1);
    kill(s->pid, SIGKILL);
    syscall(SYS_setresuid, -1, me, -1);
    if (pdeath) prctl(PR_SET_PDEATHSIG, pdeath, 0, 0, 0);
}

/* How long kwb's own start of a sandbox (exec, the libraries, the module)
 * may take, in CPU seconds; the module's initialisers have the caller's limit. */
enum { LOAD_LIMIT_S = 60 };

/* What a start that failed was, in the judge's words: a status (r filled
 * for KWB_ERUN, the candidate's doing). */
static int start_failed(const kwb_sandbox_result *r, const sb_msg *m, int loaded, const char *symbol, double limit_s) {
    const char *when = "while its module loaded";
    if (r->outcome == KWB_SANDBOX_FORBIDDEN) return kwb_fail(KWB_ERUN, "%s, the candidate made a %s", when, r->detail);
    if (!loaded && m->op == OP_FAIL && m->status == FAIL_SYMBOL)
        return kwb_fail(KWB_ENOSYM, "no function %s in the module", symbol);
    if (!loaded) return kwb_fail(KWB_EIO, "the sandbox did not start: %s", r->detail);
    if (r->outcome == KWB_SANDBOX_TIMEOUT)
        return kwb_fail(KWB_ERUN, "%s, its initialisers ran past the timeout (the timeout is %g s of CPU time); its "
                                  "sandbox was killed", when, limit_s);
    return kwb_fail(KWB_ERUN, "its sandbox %s %s", r->detail, when);
}

int kwb_sandbox_start(const char *path, const char *symbol, kwb_ctype ret, const kwb_ctype *args, uint32_t nargs,
                      const kwb_sandbox_opts *o, kwb_sandbox **out, kwb_sandbox_result *r) {
    *out = NULL;
    *r = (kwb_sandbox_result){.outcome = KWB_SANDBOX_OK};
    if (nargs > MAX_ARGS) return kwb_fail(KWB_EINVAL, "%s: more than %d arguments", symbol, MAX_ARGS);
    char sig[MAX_ARGS + 2];
    sig[0] = (char)('0' + ret);
    for (uint32_t i = 0; i < nargs; i++) sig[i + 1] = (char)('0' + args[i]);
    sig[nargs + 1] = 0;
    sb_module mod;
    int rc = module_prepare(path, &mod);
    if (rc == 1) {
        r->outcome = KWB_SANDBOX_FORBIDDEN;
        snprintf(r->detail, sizeof r->detail, "%s", mod.why);
        rc = kwb_fail(KWB_ERUN, "%s", mod.why);
    }
    if (rc) { module_free(&mod); return rc; }
    char init[20], array[20], count[20];
    snprintf(init, sizeof init, "%llx", (unsigned long long)mod.init);
    snprintf(array, sizeof array, "%llx", (unsigned long long)mod.array);
    snprintf(count, sizeof count, "%llx", (unsigned long long)mod.count);
    char *argv[8 + MAX_NEEDED] = {"kwb", "--sandbox-child", (char *)symbol, sig, init, array, count};
    for (int i = 0; i < mod.nneeded; i++) argv[7 + i] = (char *)mod.needed[i];
    char *const envp[] = {NULL};
    int sv[2], quiet = -1;
    if (!o->keep_output && (quiet = open("/dev/null", O_WRONLY | O_CLOEXEC)) < 0) {
        module_free(&mod);
        return kwb_fail(KWB_EIO, "cannot open /dev/null: %s", strerror(errno));
    }
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
        module_free(&mod);
        if (quiet >= 0) close(quiet);
        return kwb_fail(KWB_EIO, "cannot make the sandbox's channel: %s", strerror(errno));
    }
    kwb_sandbox *s = calloc(1, sizeof *s);
    if (s) s->mapped = calloc(MAX_SLOTS, sizeof *s->mapped);
    if (!s || !s->mapped) {
        if (s) free(s);
        module_free(&mod); close(sv[0]); close(sv[1]);
        if (quiet >= 0) close(quiet);
        return kwb_fail(KWB_ENOMEM, "out of memory");
    }
    s->chan = s->status_fd = -1;
    int root = geteuid() == 0;
    s->uid = sandbox_uid(&s->borrowed);
    pid_t parent = getpid();
    judge_hide();
    s->hidden = 1;
    /* The sandbox and its caller share one processor (the caller's now) for
     * the sandbox's life: the inputs the caller draws before each call are
     * in that processor's caches when the kernel runs, every call alike, and
     * no run depends on which processor the scheduler picked. */
    int cpu = sched_getcpu();
    if (cpu >= 0 && sched_getaffinity(0, sizeof s->judge_cpus, &s->judge_cpus) == 0) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        s->pinned = sched_setaffinity(0, sizeof one, &one) == 0;
    }
    uid_t uid = s->uid;
    pid_t pid = fork();
    if (pid == 0) {   /* only async-signal-safe calls until exec */
        /* out of the way first */
        int c = fcntl(sv[1], F_DUPFD, 10), m = fcntl(mod.fd, F_DUPFD, 10), q = quiet >= 0 ? fcntl(quiet, F_DUPFD, 10) : -1;
        if (c < 0 || m < 0 || dup2(c, FD_CHAN) < 0 || dup2(m, FD_MODULE) < 0) _exit(126);
        if (quiet >= 0 && (q < 0 || dup2(q, 1) < 0 || dup2(q, 2) < 0)) _exit(126);
        syscall(SYS_close_range, FD_MODULE + 1, ~0u, 0);
        int keep[] = {FD_CHAN, FD_MODULE};
        for (int i = 0; i < 2; i++) fcntl(keep[i], F_SETFD, 0);
        struct rlimit zero = {0, 0};
        setrlimit(RLIMIT_CORE, &zero);
        if (root && (setgroups(0, NULL) != 0 || setgid(65534) != 0)) _exit(125);
        if (uid != geteuid() && syscall(SYS_setresuid, uid, uid, uid) != 0) _exit(125);
        prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        if (getppid() != parent) _exit(125);
        int e = open("/proc/self/exe", O_RDONLY);   /* this very program, whatever its path */
        if (e < 0) _exit(127);
        syscall(SYS_execveat, e, "", argv, envp, AT_EMPTY_PATH);
        _exit(127);
    }
    close(sv[1]);
    module_free(&mod);
    if (quiet >= 0) close(quiet);
    if (pid < 0) {
        close(sv[0]);
        kwb_sandbox_free(s);
        return kwb_fail(KWB_EIO, "cannot start a sandbox: %s", strerror(errno));
    }
    s->pid = pid;
    s->chan = sv[0];
    s->alive = 1;
    s->nargs = nargs;
    memcpy(s->args, args, nargs * sizeof *args);
    char p[64];
    snprintf(p, sizeof p, "/proc/%d/status", (int)pid);
    s->status_fd = open(p, O_RDONLY | O_CLOEXEC);
    if (s->status_fd < 0 || clock_getcpuclockid(pid, &s->clock) != 0) {
        kwb_sandbox_free(s);
        return kwb_fail(KWB_EIO, "cannot watch the sandbox (pid %d): %s", (int)pid, strerror(errno));
    }
    /* loaded (kwb's own work and the system's libraries'), asleep; then its
     * module's initialisers, on the caller's limit from there */
    sb_msg m = {0};
    double c0, asleep;
    int loaded = 0;
    if (await(s, 0, OP_LOADED, 0, LOAD_LIMIT_S, &m, r, NULL) || settle(s, 0, LOAD_LIMIT_S, &c0, r)) goto failed;
    loaded = 1;
    m = (sb_msg){.op = OP_GO};
    if (send_msg(s->chan, &m, -1)) { end(s, r); goto failed; }
    if (await(s, 0, OP_READY, c0, o->limit_s, &m, r, NULL) || settle(s, c0, o->limit_s, &asleep, r)) goto failed;
    s->cpu_end = asleep;
    *out = s;
    return 0;
failed:
    rc = start_failed(r, &m, loaded, symbol, o->limit_s);
    kwb_sandbox_free(s);
    return rc;
}

/* Send count records at once (one sendmmsg a chunk: the sandbox, on this
 * processor, wakes to find them all), each with fds[j] passed where >= 0.
 * 0, or -1 when the channel failed. */
static int send_all(int chan, sb_msg *m, const int *fds, uint32_t count) {
    enum { CHUNK = 64 };
    struct mmsghdr hs[CHUNK];
    struct iovec iov[CHUNK];
    union { char buf[CMSG_SPACE(sizeof(int))]; struct cmsghdr align; } u[CHUNK];
    for (uint32_t done = 0; done < count;) {
        uint32_t k = count - done < CHUNK ? count - done : CHUNK;
        for (uint32_t j = 0; j < k; j++) {
            iov[j] = (struct iovec){&m[done + j], sizeof m[done + j]};
            hs[j] = (struct mmsghdr){.msg_hdr = {.msg_iov = &iov[j], .msg_iovlen = 1}};
            if (fds && fds[done + j] >= 0) {
                hs[j].msg_hdr.msg_control = u[j].buf;
                hs[j].msg_hdr.msg_controllen = sizeof u[j].buf;
                struct cmsghdr *c = CMSG_FIRSTHDR(&hs[j].msg_hdr);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(sizeof(int));
                memcpy(CMSG_DATA(c), &fds[done + j], sizeof(int));
            }
        }
        for (uint32_t sent = 0; sent < k;) {
            int n = sendmmsg(chan, hs + sent, k - sent, MSG_NOSIGNAL);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) return -1;
            sent += (uint32_t)n;
        }
        done += k;
    }
    return 0;
}

static int64_t slot_in(const kwb_sandbox *s, uint64_t serial) {
    for (uint32_t i = 0; i < s->nmapped; i++)
        if (s->mapped[i] == serial) return i;
    return -1;
}

static int crashed(kwb_sandbox *s, kwb_sandbox_result *r, const char *why) {
    r->outcome = KWB_SANDBOX_CRASHED;
    snprintf(r->detail, sizeof r->detail, "%s", why);
    end(s, NULL);
    return 1;
}

/* The buffers of the calls at hand (n of them, NULL entries skipped) mapped
 * in the sandbox and no other: where one mapped there is not among them,
 * every mapping goes first (UNMAP), so while these calls run the candidate
 * can reach only their buffers; slot[i] is bufs[i]'s. One round trip, none
 * when they are mapped already (a shape's runs, call after call). 0, or 1
 * when the sandbox ended (r says why). */
static int map_calls(kwb_sandbox *s, uint32_t n, kwb_buffer *const *bufs, int32_t *slot, kwb_sandbox_result *r) {
    kwb_buffer_shared *sh = calloc(n ? n : 1, sizeof *sh);
    sb_msg *m = calloc(n + 1, sizeof *m);
    int *fds = calloc(n + 1, sizeof *fds);
    uint64_t *want = calloc(n ? n : 1, sizeof *want);
    int rc = 1;
    if (!sh || !m || !fds || !want) { crashed(s, r, "out of memory"); goto out; }
    uint32_t nwant = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (!bufs[i]) continue;
        if (kwb_buffer_share(bufs[i], &sh[i])) { crashed(s, r, kwb_last_error()); goto out; }
        int seen = 0;
        for (uint32_t j = 0; j < nwant && !seen; j++) seen = want[j] == sh[i].serial;
        if (!seen) want[nwant++] = sh[i].serial;
    }
    int keep = 1;   /* every buffer mapped now is one of these calls' */
    for (uint32_t i = 0; i < s->nmapped && keep; i++) {
        int found = 0;
        for (uint32_t j = 0; j < nwant && !found; j++) found = want[j] == s->mapped[i];
        keep = found;
    }
    uint32_t count = 0, mapped = keep ? s->nmapped : 0;
    if (!keep) {
        m[count] = (sb_msg){.op = OP_UNMAP, .seq = ++s->seq};
        fds[count++] = -1;
        s->nmapped = 0;
    }
    for (uint32_t i = 0; i < n; i++) {
        if (!bufs[i] || slot_in(s, sh[i].serial) >= 0) continue;
        int again = 0;   /* the same buffer twice in these calls: mapped once */
        for (uint32_t j = 0; j < i && !again; j++) again = bufs[j] && sh[j].serial == sh[i].serial;
        if (again) continue;
        if (mapped == MAX_SLOTS) {
            char why[80];
            snprintf(why, sizeof why, "more than %d buffers for one sandbox", MAX_SLOTS);
            crashed(s, r, why);
            goto out;
        }
        m[count] = (sb_msg){.op = OP_MAP, .seq = ++s->seq, .bytes = sh[i].bytes, .data_offset = sh[i].data_offset};
        fds[count++] = sh[i].fd;
        s->mapped[mapped++] = sh[i].serial;
    }
    if (count) {
        m[count - 1].slot = 1;   /* the last is answered */
        if (send_all(s->chan, m, fds, count)) { end(s, r); goto out; }
        sb_msg got;
        double c0 = s->cpu_end, cpu;
        if (await(s, s->seq, OP_MAPPED, c0, 60, &got, r, NULL) || settle(s, c0, 60, &cpu, r)) goto out;
        s->cpu_end = cpu;
        if (got.nargs != mapped) { crashed(s, r, "the sandbox lost count of its buffers"); goto out; }
        s->nmapped = mapped;
    }
    for (uint32_t i = 0; i < n; i++) slot[i] = bufs[i] ? (int32_t)slot_in(s, sh[i].serial) : -1;
    rc = 0;
out:
    free(sh);
    free(m);
    free(fds);
    free(want);
    return rc;
}

int kwb_sandbox_calls(kwb_sandbox *s, uint32_t count, const kwb_value *args, kwb_buffer *const *bufs,
                      double limit_s, kwb_sandbox_result *r) {
    *r = (kwb_sandbox_result){.outcome = KWB_SANDBOX_OK};
    if (count == 0 || count > 64) return kwb_fail(KWB_EINVAL, "a sandbox takes 1 to 64 calls at once, not %u", count);
    if (!s->alive) {
        r->outcome = KWB_SANDBOX_CRASHED;
        snprintf(r->detail, sizeof r->detail, "the sandbox ended earlier");
        return 0;
    }
    size_t total = (size_t)count * s->nargs;
    sb_msg *m = calloc(count, sizeof *m);
    kwb_buffer **ptrs = calloc(total ? total : 1, sizeof *ptrs);
    int32_t *slot = calloc(total ? total : 1, sizeof *slot);
    if (!m || !ptrs || !slot) { free(m); free(ptrs); free(slot); return kwb_fail(KWB_ENOMEM, "out of memory"); }
    for (size_t k = 0; k < total; k++)
        if (bufs && s->args[k % s->nargs] == KWB_C_PTR) ptrs[k] = bufs[k];
    int ended = map_calls(s, (uint32_t)total, ptrs, slot, r);
    free(ptrs);
    if (ended) { free(m); free(slot); return 0; }
    for (uint32_t j = 0; j < count; j++) {
        m[j].op = OP_CALL;
        m[j].nargs = s->nargs;
        for (uint32_t i = 0; i < s->nargs; i++) {
            size_t k = (size_t)j * s->nargs + i;
            m[j].args[i] = args[k];
            m[j].bufslot[i] = -1;
            if (s->args[i] == KWB_C_PTR) {
                m[j].args[i].u64 = 0;   /* no address of the judge's reaches the sandbox */
                m[j].bufslot[i] = slot[k];
            }
        }
    }
    free(slot);
    unsigned long v = 0;
    char st = proc_state(s, &v);
    double c0 = cpu_now(s), c1;
    if (st != 'S' || v != s->nvcsw) {   /* awake with nothing to do: it ran between calls */
        if (settle(s, s->cpu_end, limit_s, &c1, r)) { free(m); return 0; }
        c0 = c1;
    }
    r->between_s = c0 - s->cpu_end;
    /* all the calls queued at once: the sandbox runs them back to back,
     * asleep only after the last */
    double t0 = kwb_now(), limit = limit_s * count;
    for (uint32_t j = 0; j < count; j++) {
        m[j].seq = ++s->seq;
        m[j].slot = j + 1 == count;   /* answer the last one */
    }
    if (send_all(s->chan, m, NULL, count)) { free(m); end(s, r); return 0; }
    sb_msg done;
    int failed = await(s, s->seq, OP_DONE, c0, limit, &done, r, NULL) || settle(s, c0, limit, &c1, r);
    free(m);
    r->wall_s = kwb_now() - t0;
    if (failed) return 0;
    r->cpu_s = c1 - c0;
    r->ret = done.ret;
    s->cpu_end = c1;
    return 0;
}

int kwb_sandbox_call(kwb_sandbox *s, const kwb_value *args, kwb_buffer *const *bufs, double limit_s,
                     kwb_sandbox_result *r) {
    return kwb_sandbox_calls(s, 1, args, bufs, limit_s, r);
}

int kwb_sandbox_pid(const kwb_sandbox *s) { return s->alive ? (int)s->pid : 0; }

void kwb_sandbox_free(kwb_sandbox *s) {
    if (!s) return;
    end(s, NULL);
    if (s->hidden) judge_show();
    if (s->pinned) sched_setaffinity(0, sizeof s->judge_cpus, &s->judge_cpus);
    if (s->chan >= 0) close(s->chan);
    if (s->status_fd >= 0) close(s->status_fd);
    free(s->mapped);
    free(s);
}
