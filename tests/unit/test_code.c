/* test_code.c: a built module's code digest (core/code.c): the same code from
 * other sources is one digest, other code another, and an image it cannot
 * read is refused without reading outside it */
#include <elf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kwb.h"
#include "util.h"
#include "unit.h"

static char dir[64];

/* The digest of a source built as the host backend builds candidates, and
 * the SHA-256 of the whole shared object; 0 on success. */
static int build(const char *src, const char *name, char digest[65], char whole[65]) {
    kwb_host_build b = {.source = src, .name = name, .build_dir = dir, .no_load = 1};
    kwb_host_module *m = NULL;
    if (kwb_host_compile(&b, &m, NULL)) return -1;
    size_t len = 0;
    char *image = kwb_read_file(kwb_host_module_path(m), &len);
    kwb_host_module_free(m);
    if (!image) return -1;
    int rc = kwb_code_digest(image, len, digest) || kwb_sha256_hex(image, len, whole);
    free(image);
    return rc;
}

static const char dot[] =
    "static __attribute__((noinline)) float twice(float x) { return 2 * x; }\n"
    "float dot(const float *a, const float *b, int n) {\n"
    "    float s = 0;\n"
    "    for (int i = 0; i < n; i++) s += a[i] * b[i];\n"
    "    return twice(s);\n"
    "}\n";
/* a comment, other names for the local variables and the static helper, another file name */
static const char dot_renamed[] =
    "/* the same kernel, said otherwise */\n"
    "static __attribute__((noinline)) float doubled(float v) { return 2 * v; }\n"
    "float dot(const float *a, const float *b, int n) {\n"
    "    float acc = 0;   // the running sum\n"
    "    for (int k = 0; k < n; k++) acc += a[k] * b[k];\n"
    "    return doubled(acc);\n"
    "}\n";
/* one constant changed */
static const char dot_other[] =
    "static __attribute__((noinline)) float twice(float x) { return 3 * x; }\n"
    "float dot(const float *a, const float *b, int n) {\n"
    "    float s = 0;\n"
    "    for (int i = 0; i < n; i++) s += a[i] * b[i];\n"
    "    return twice(s);\n"
    "}\n";

static void test_code_digest_of_a_shared_object_ignores_comments_and_names(void) {
    char d1[65], w1[65], d2[65], w2[65], d3[65], w3[65];
    CHECK_INT(build(dot, "dot.c", d1, w1), 0);
    CHECK_INT(build(dot_renamed, "renamed.c", d2, w2), 0);
    CHECK_INT(build(dot_other, "dot.c", d3, w3), 0);
    CHECK_INT(strlen(d1), 64);
    CHECK(strcmp(w1, w2) != 0);   /* the files differ (build id, symbol and file names) ... */
    CHECK_STR(d2, d1);            /* ... their code does not */
    CHECK(strcmp(d3, d1) != 0);   /* one constant is other code */
}

/* A flag kept where the code reads it, in an allocated section named like
 * a comment, like debug information, or an allocated note: loaded with the
 * module either way. Two modules that differ only in the flag behave apart
 * (1 makes dot return 0), so their digests differ. */
static const char dot_body[] =
    "float dot(const float *a, const float *b, int n) {\n"
    "    if (skip) return 0;\n"
    "    float s = 0;\n"
    "    for (int i = 0; i < n; i++) s += a[i] * b[i];\n"
    "    return s;\n"
    "}\n";
static const char *const flag_in[] = {
    "__attribute__((section(\".comment.k\"))) const volatile int skip = %d;\n",
    "__attribute__((section(\".debug_k\"))) const volatile int skip = %d;\n",
    "__asm__(\".section .note.k,\\\"a\\\",@note\\n.balign 4\\n.long 4, 4, 7\\n.asciz \\\"KWB\\\"\\n"
    "skip: .long %d\\n.previous\");\nextern const volatile int skip;\n",
};

static void test_code_digest_of_a_shared_object_counts_its_loaded_sections_whatever_their_names(void) {
    for (int i = 0; i < 3; i++) {
        char src[2][768], d[2][65], w[2][65];
        for (int v = 0; v < 2; v++) {
            int n = snprintf(src[v], sizeof src[v], flag_in[i], v);
            snprintf(src[v] + n, sizeof src[v] - (size_t)n, "%s", dot_body);
            CHECK_INT(build(src[v], "flag.c", d[v], w[v]), 0);
        }
        CHECK(strcmp(d[0], d[1]) != 0);   /* the flag is loaded: other behaviour, another digest */
    }
}

/* ---- a cubin, made by hand -------------------------------------------- */

typedef struct {
    const char *name;
    uint32_t type;
    uint64_t flags;
    const void *data;
    size_t size;
    uint32_t link, info;
    uint64_t entsize;
} section;

/* An ELF64 image of the given sections (section 0 the null one, the names'
 * table last) into out; its length. */
static size_t make_elf(unsigned char *out, uint16_t machine, uint16_t type, const section *secs, int n) {
    char names[512] = "";
    size_t nlen = 1, name_at[16];
    for (int i = 0; i < n; i++) {
        name_at[i] = nlen;
        memcpy(names + nlen, secs[i].name, strlen(secs[i].name) + 1);
        nlen += strlen(secs[i].name) + 1;
    }
    size_t shstr_name = nlen;
    memcpy(names + nlen, ".shstrtab", 10);
    nlen += 10;
    size_t off = sizeof(Elf64_Ehdr), data_at[16];
    for (int i = 0; i < n; i++) {
        data_at[i] = off;
        if (secs[i].size) memcpy(out + off, secs[i].data, secs[i].size);
        off += secs[i].size;
    }
    size_t names_at = off;
    memcpy(out + off, names, nlen);
    off += nlen;
    off = (off + 7) & ~(size_t)7;
    Elf64_Shdr sh[18];
    memset(sh, 0, sizeof sh);
    for (int i = 0; i < n; i++)
        sh[i + 1] = (Elf64_Shdr){.sh_name = (uint32_t)name_at[i], .sh_type = secs[i].type, .sh_flags = secs[i].flags,
                                 .sh_offset = data_at[i], .sh_size = secs[i].size, .sh_link = secs[i].link,
                                 .sh_info = secs[i].info, .sh_addralign = 1, .sh_entsize = secs[i].entsize};
    sh[n + 1] = (Elf64_Shdr){.sh_name = (uint32_t)shstr_name, .sh_type = SHT_STRTAB, .sh_offset = names_at,
                             .sh_size = nlen, .sh_addralign = 1};
    memcpy(out + off, sh, (size_t)(n + 2) * sizeof *sh);
    Elf64_Ehdr eh = {.e_type = type, .e_machine = machine, .e_version = EV_CURRENT, .e_shoff = off,
                     .e_ehsize = sizeof eh, .e_shentsize = sizeof(Elf64_Shdr), .e_shnum = (uint16_t)(n + 2),
                     .e_shstrndx = (uint16_t)(n + 1), .e_flags = 0x5a055a};
    memcpy(eh.e_ident, ELFMAG, SELFMAG);
    eh.e_ident[EI_CLASS] = ELFCLASS64;
    eh.e_ident[EI_DATA] = ELFDATA2LSB;
    eh.e_ident[EI_VERSION] = EV_CURRENT;
    memcpy(out, &eh, sizeof eh);
    return off + (size_t)(n + 2) * sizeof *sh;
}

/* A cubin of one kernel: its names, its code, one symbol's value and its line table given. */
static int cubin_digest(const char *strtab, size_t strtab_len, unsigned char code_byte, uint64_t sym_value,
                        const char *lines, char digest[65]) {
    unsigned char code[16];
    memset(code, 0x11, sizeof code);
    code[3] = code_byte;
    Elf64_Sym syms[2] = {{0}, {.st_name = 1, .st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC), .st_shndx = 4,
                                .st_value = sym_value, .st_size = sizeof code}};
    unsigned char info[8] = {4, 0x2f, 8, 0, 1, 0, 0, 0};
    section secs[] = {
        {".strtab", SHT_STRTAB, 0, strtab, strtab_len, 0, 0, 0},
        {".symtab", SHT_SYMTAB, 0, syms, sizeof syms, 1, 1, sizeof(Elf64_Sym)},
        {".nv.info.k", 0x70000000, 0x40, info, sizeof info, 2, 4, 0},
        {".text.k", SHT_PROGBITS, SHF_ALLOC | SHF_EXECINSTR | (40u << 24), code, sizeof code, 2, 1, 0},
        {".nv_debug_line_sass", SHT_PROGBITS, 0, lines, strlen(lines), 0, 0, 0},
    };
    static unsigned char img[4096];
    size_t n = make_elf(img, EM_CUDA, ET_EXEC, secs, 5);
    return kwb_code_digest(img, n, digest);
}

static void test_code_digest_of_a_cubin_ignores_names_and_line_tables(void) {
    char base[65], d[65];
    CHECK_INT(cubin_digest("\0k\0", 3, 0x22, 0, "line 1 file a.cu", base), 0);
    CHECK_INT(cubin_digest("\0kernel_renamed\0", 16, 0x22, 0, "line 7 file b.cu, other lines", d), 0);
    CHECK_STR(d, base);   /* other names and line information: the same code */
    CHECK_INT(cubin_digest("\0k\0", 3, 0x23, 0, "line 1 file a.cu", d), 0);
    CHECK(strcmp(d, base) != 0);   /* one byte of SASS */
    CHECK_INT(cubin_digest("\0k\0", 3, 0x22, 8, "line 1 file a.cu", d), 0);
    CHECK(strcmp(d, base) != 0);   /* a symbol's value (where a relocation points) */
}

static void test_code_digest_refuses_what_it_cannot_read(void) {
    char d[65], w[65];
    CHECK_INT(kwb_code_digest("short", 5, d), KWB_EINVAL);
    CHECK_STR(kwb_last_error(), "the module is not an ELF file whose code kwb can read: it is shorter than an ELF64 header");
    unsigned char zeros[128] = {0};
    CHECK_INT(kwb_code_digest(zeros, sizeof zeros, d), KWB_EINVAL);
    CHECK_STR(kwb_last_error(),
              "the module is not an ELF file whose code kwb can read: it does not begin with the ELF magic number");
    /* a real shared object cut short anywhere after its header: refused, never read past */
    CHECK_INT(build(dot, "dot.c", d, w), 0);
    kwb_host_build b = {.source = dot, .name = "dot.c", .build_dir = dir, .no_load = 1};
    kwb_host_module *m = NULL;
    CHECK_INT(kwb_host_compile(&b, &m, NULL), 0);
    size_t len = 0;
    char *image = kwb_read_file(kwb_host_module_path(m), &len);
    kwb_host_module_free(m);
    CHECK(image != NULL);
    int refused = 0, cuts = 0;
    for (size_t cut = sizeof(Elf64_Ehdr); cut < len; cut += 97) {
        char *copy = malloc(cut);   /* (its own allocation: ASan sees a read past it) */
        memcpy(copy, image, cut);
        cuts++;
        refused += kwb_code_digest(copy, cut, d) == KWB_EINVAL;
        free(copy);
    }
    CHECK_INT(kwb_code_digest(image, len, d), 0);
    /* .text's header pointing past the end */
    Elf64_Ehdr eh;
    memcpy(&eh, image, sizeof eh);
    Elf64_Shdr names, sh;
    memcpy(&names, image + eh.e_shoff + eh.e_shstrndx * sizeof sh, sizeof sh);
    int text = 0;
    for (int i = 1; i < eh.e_shnum && !text; i++) {
        memcpy(&sh, image + eh.e_shoff + i * sizeof sh, sizeof sh);
        if (strcmp(image + names.sh_offset + sh.sh_name, ".text") == 0) text = i;
    }
    CHECK(text > 0);
    sh.sh_offset = len - 8;
    memcpy(image + eh.e_shoff + text * sizeof sh, &sh, sizeof sh);
    CHECK_INT(kwb_code_digest(image, len, d), KWB_EINVAL);
    CHECK_STR(kwb_last_error(), "the module is not an ELF file whose code kwb can read: a section's contents lie "
                                "outside it");
    free(image);
    CHECK_INT(refused, cuts);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/kwb-unit-code.%ld", (long)getpid());
    RUN(test_code_digest_of_a_shared_object_ignores_comments_and_names);
    RUN(test_code_digest_of_a_shared_object_counts_its_loaded_sections_whatever_their_names);
    RUN(test_code_digest_of_a_cubin_ignores_names_and_line_tables);
    RUN(test_code_digest_refuses_what_it_cannot_read);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) return 1;
    return UNIT_EXIT();
}
