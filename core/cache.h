/* cache.h: the candidate cache's private side, shared by cache.c,
 * cache_bundle.c and lua_cache.c */
#ifndef KWB_CACHE_H
#define KWB_CACHE_H
#include <sqlite3.h>
#include <zstd.h>

#include "kwb.h"

sqlite3 *kwb_cache_db(kwb_cache *c);
/* A prepared statement for sql from the handle's statement cache, reset and
 * unbound; NULL (with kwb_last_error set) if it does not prepare. sql must
 * hold exactly one statement. */
sqlite3_stmt *kwb_cache_stmt(kwb_cache *c, const char *sql);
/* Record an SQLite error as "cache PATH: what: sqlite message" and return
 * KWB_CACHE_EDB. */
int kwb_cache_dberr(kwb_cache *c, const char *what);
/* Decompress one frame, with prefix (may be NULL) as the delta base; checks
 * the size against raw_size and the content against id. */
int kwb_blob_decode(ZSTD_DCtx *d, const char *id, const void *frame, size_t flen,
                    const void *prefix, size_t plen, uint64_t raw_size, char **out);

#endif
