/* hash.c: SHA-256 and HMAC-SHA-256 through OpenSSL's libcrypto */
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <limits.h>

#include "error.h"
#include "kwb.h"

static void to_hex(const unsigned char *md, unsigned mdlen, char *out) {
    static const char hex[] = "0123456789abcdef";
    for (unsigned i = 0; i < mdlen; i++) {
        out[2 * i] = hex[md[i] >> 4];
        out[2 * i + 1] = hex[md[i] & 15];
    }
    out[2 * mdlen] = 0;
}

int kwb_sha256_hex(const void *data, size_t len, char *out) {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    if (!EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL))
        return kwb_fail(KWB_EIO, "SHA-256 failed in libcrypto");
    to_hex(md, mdlen, out);
    return 0;
}

int kwb_hmac_sha256_hex(const void *key, size_t keylen, const void *data, size_t len, char *out) {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    if (keylen > INT_MAX) return kwb_fail(KWB_EINVAL, "an HMAC key of %zu bytes is too long", keylen);
    if (!HMAC(EVP_sha256(), key, (int)keylen, data, len, md, &mdlen))
        return kwb_fail(KWB_EIO, "HMAC-SHA-256 failed in libcrypto");
    to_hex(md, mdlen, out);
    return 0;
}
