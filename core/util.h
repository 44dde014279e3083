/* util.h: small helpers shared by the C core */
#ifndef KWB_UTIL_H
#define KWB_UTIL_H
#include <stddef.h>

/* A growable string. Start with {0}; oom is set (and further adds ignored)
 * if an allocation fails. Free s with free(). */
typedef struct kwb_strbuf { char *s; size_t len, cap; int oom; } kwb_strbuf;

void kwb_strbuf_add(kwb_strbuf *b, const char *s, size_t n);
void kwb_strbuf_addf(kwb_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* mkdir -p. Returns 0 or -1 with errno set. */
int kwb_mkdirs(const char *path);

/* Read a whole file into a NUL-terminated buffer (free with free()); NULL and
 * errno set on failure. */
char *kwb_read_file(const char *path, size_t *len);

#endif
