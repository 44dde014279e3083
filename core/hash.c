/* hash.c: SHA-256 through OpenSSL's libcrypto */
#include <openssl/evp.h>

#include "error.h"
#include "kwb.h"

int kwb_sha256_hex(const void *data, size_t len, char *out) {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    if (!EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL))
        return kwb_fail(KWB_EIO, "SHA-256 failed in libcrypto");
    static const char hex[] = "0123456789abcdef";
    for (unsigned i = 0; i < mdlen; i++) {
        out[2 * i] = hex[md[i] >> 4];
        out[2 * i + 1] = hex[md[i] & 15];
    }
    out[2 * mdlen] = 0;
    return 0;
}
