/* code.c: a built module's code as one digest. Two candidates whose sources
 * differ only in what cannot change what they compile to (a comment, a local
 * variable's name) build to modules with the same digest, by which the loop
 * knows a candidate that repeats measured code (kwb.loop.session).
 *
 * The module is an ELF file: a host candidate's shared object or a CUDA
 * candidate's cubin. Hashed are the sections that decide what the module
 * does once loaded, each with its name, type, flags, address, size, links and
 * contents; left out is what only names or describes the build: notes (the
 * build id), debug and line information, the compiler's comment. A shared
 * object is loaded by its segments: its allocated sections count, whatever
 * their names, and only they (its full symbol table, with the source file's
 * and static functions' names, is never loaded); of its notes only the
 * build id is left out. A cubin's loader reads its sections: all count but the
 * string tables, and its symbol table counts without the names (relocations
 * and kernel attributes refer to symbols by index, and a kernel's own name
 * is its section's). Every offset and size is checked against the image. */
#include <elf.h>
#include <openssl/evp.h>
#include <stdint.h>
#include <string.h>

#include "error.h"
#include "kwb.h"

#ifndef EM_CUDA
#define EM_CUDA 190
#endif

typedef struct {
    const unsigned char *p;
    size_t len;
} image;

/* The n bytes at off, or NULL where they are not all inside the image. */
static const unsigned char *at(const image *im, uint64_t off, uint64_t n) {
    return off <= im->len && n <= im->len - off ? im->p + off : NULL;
}

static int starts(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

/* A value into the digest as 8 little-endian bytes, whatever this machine's order. */
static int put_u64(EVP_MD_CTX *md, uint64_t v) {
    unsigned char b[8];
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(v >> (8 * i));
    return EVP_DigestUpdate(md, b, sizeof b);
}

/* Bytes into the digest, after their length (so no two sequences of fields run together). */
static int put_bytes(EVP_MD_CTX *md, const void *p, size_t n) {
    return put_u64(md, n) && (n == 0 || EVP_DigestUpdate(md, p, n));
}

enum { SHARED_OBJECT, CUBIN };

/* Does a section only name or describe the build (left out of the digest)?
 * A shared object's by whether it is loaded, whatever its name or type: an
 * allocated section named like debug information or a comment, or an
 * allocated note, is in memory where the code can read it (a flag there
 * would make two modules of one digest behave apart); its build id is left
 * out within its note (build_id). A cubin's by name and type. */
static int left_out(int kind, const char *name, const Elf64_Shdr *s) {
    static const char *const describe[] = {".debug", ".nv_debug", ".note", ".comment", ".gnu_debug", NULL};
    if (s->sh_type == SHT_NULL) return 1;
    if (kind == SHARED_OBJECT) return !(s->sh_flags & SHF_ALLOC);
    if (s->sh_type == SHT_NOTE) return 1;
    for (int i = 0; describe[i]; i++)
        if (starts(name, describe[i])) return 1;
    return s->sh_type == SHT_STRTAB;
}

/* The bytes of a note section that are its build id (the linker's hash of
 * the whole file, names and debug information too): where the section is
 * one note, GNU's NT_GNU_BUILD_ID, its descriptor's offset and size in the
 * section; else none (0 bytes), and the whole note is hashed. */
static uint64_t build_id(const unsigned char *p, const Elf64_Shdr *s, uint64_t *off) {
    Elf64_Nhdr nh;
    if (s->sh_type != SHT_NOTE || s->sh_size < sizeof nh) return 0;
    memcpy(&nh, p, sizeof nh);
    uint64_t name = (nh.n_namesz + 3) & ~(uint64_t)3, desc = (nh.n_descsz + 3) & ~(uint64_t)3;
    if (nh.n_type != NT_GNU_BUILD_ID || nh.n_namesz != 4 || memcmp(p + sizeof nh, "GNU", 4) != 0 ||
        sizeof nh + name + desc != s->sh_size)
        return 0;
    *off = sizeof nh + name;
    return nh.n_descsz;
}

/* A cubin's symbol table without the names: each symbol's binding, type,
 * visibility, section, value and size. */
static int put_symbols(EVP_MD_CTX *md, const unsigned char *p, const Elf64_Shdr *s) {
    if (s->sh_entsize != sizeof(Elf64_Sym) || s->sh_size % sizeof(Elf64_Sym)) return -1;
    for (uint64_t k = 0; k < s->sh_size; k += sizeof(Elf64_Sym)) {
        Elf64_Sym y;
        memcpy(&y, p + k, sizeof y);
        if (!put_u64(md, y.st_info) || !put_u64(md, y.st_other) || !put_u64(md, y.st_shndx) ||
            !put_u64(md, y.st_value) || !put_u64(md, y.st_size))
            return 0;
    }
    return 1;
}

static int refuse(const char *why) {
    return kwb_fail(KWB_EINVAL, "the module is not an ELF file whose code kwb can read: %s", why);
}

/* The sections of the image into md: 0, or a status (a module refused). */
static int put_sections(EVP_MD_CTX *md, const image *im, const Elf64_Ehdr *eh, int kind) {
    if (eh->e_shentsize != sizeof(Elf64_Shdr)) return refuse("its section headers are not of ELF64's size");
    if (eh->e_shnum == 0 || eh->e_shstrndx == SHN_XINDEX)
        return refuse("it has no section headers, or more than its header can count");
    if (eh->e_shstrndx >= eh->e_shnum) return refuse("its section names' table is not one of its sections");
    const unsigned char *table = at(im, eh->e_shoff, (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr));
    if (!table) return refuse("its section headers lie outside it");
    Elf64_Shdr names;
    memcpy(&names, table + (size_t)eh->e_shstrndx * sizeof names, sizeof names);
    const unsigned char *strs = names.sh_type == SHT_NOBITS ? NULL : at(im, names.sh_offset, names.sh_size);
    if (!strs || names.sh_size == 0 || strs[names.sh_size - 1] != 0)
        return refuse("its section names' table lies outside it or does not end its last name");
    for (unsigned i = 0; i < eh->e_shnum; i++) {
        Elf64_Shdr s;
        memcpy(&s, table + (size_t)i * sizeof s, sizeof s);
        if (s.sh_name >= names.sh_size) return refuse("a section's name lies outside the names' table");
        const char *name = (const char *)strs + s.sh_name;
        if (left_out(kind, name, &s)) continue;
        const unsigned char *p = s.sh_type == SHT_NOBITS ? NULL : at(im, s.sh_offset, s.sh_size);
        if (s.sh_type != SHT_NOBITS && !p) return refuse("a section's contents lie outside it");
        int ok = put_bytes(md, name, strlen(name)) && put_u64(md, s.sh_type) && put_u64(md, s.sh_flags) &&
                 put_u64(md, s.sh_addr) && put_u64(md, s.sh_size) && put_u64(md, s.sh_link) &&
                 put_u64(md, s.sh_info) && put_u64(md, s.sh_addralign) && put_u64(md, s.sh_entsize);
        if (ok && p && kind == CUBIN && s.sh_type == SHT_SYMTAB) {
            ok = put_symbols(md, p, &s);
            if (ok < 0) return refuse("its symbol table's entries are not ELF64 symbols");
        } else if (ok && p) {
            uint64_t off = 0, id = kind == SHARED_OBJECT ? build_id(p, &s, &off) : 0;
            ok = EVP_DigestUpdate(md, p, id ? off : s.sh_size) &&
                 (!id || EVP_DigestUpdate(md, p + off + id, s.sh_size - off - id));
        }
        if (!ok) return kwb_fail(KWB_EIO, "SHA-256 failed in libcrypto");
    }
    return 0;
}

int kwb_code_digest(const void *data, size_t len, char *out) {
    image im = {data, len};
    Elf64_Ehdr eh;
    if (!data || len < sizeof eh) return refuse("it is shorter than an ELF64 header");
    memcpy(&eh, data, sizeof eh);
    if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) return refuse("it does not begin with the ELF magic number");
    if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB)
        return refuse("it is not 64-bit little-endian ELF");
    int kind;
    if (eh.e_machine == EM_CUDA) kind = CUBIN;
    else if (eh.e_type == ET_DYN) kind = SHARED_OBJECT;
    else return refuse("it is neither a shared object nor a cubin");
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    if (!md || !EVP_DigestInit_ex(md, EVP_sha256(), NULL)) {
        EVP_MD_CTX_free(md);
        return kwb_fail(KWB_EIO, "SHA-256 failed in libcrypto");
    }
    static const char tag[] = "kwb-code-1";
    int rc = put_bytes(md, tag, sizeof tag - 1) && put_u64(md, eh.e_type) && put_u64(md, eh.e_machine) &&
                     put_u64(md, eh.e_flags) && put_u64(md, eh.e_entry)
                 ? put_sections(md, &im, &eh, kind)
                 : kwb_fail(KWB_EIO, "SHA-256 failed in libcrypto");
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    if (!rc && !EVP_DigestFinal_ex(md, digest, &n)) rc = kwb_fail(KWB_EIO, "SHA-256 failed in libcrypto");
    EVP_MD_CTX_free(md);
    if (rc) return rc;
    static const char hex[] = "0123456789abcdef";
    for (unsigned i = 0; i < n; i++) {
        out[2 * i] = hex[digest[i] >> 4];
        out[2 * i + 1] = hex[digest[i] & 15];
    }
    out[2 * n] = 0;
    return 0;
}
