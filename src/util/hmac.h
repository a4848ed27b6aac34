/*
 * SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104): the keyed hash with which a connection
 * proves that it knows the job secret without sending it (bootstrap/wire.c, the nets'
 * handshakes). Written for zinc; tests/unit/util_test.c checks them against the FIPS 180-2
 * examples and RFC 4231's test cases.
 */
#ifndef ZN_UTIL_HMAC_H
#define ZN_UTIL_HMAC_H

#include <stddef.h>
#include <stdint.h>

#define ZN_SHA256_BYTES 32

struct zn_sha256 {
    uint32_t h[8];
    uint64_t total; /* bytes hashed so far */
    uint8_t buf[64];
    size_t nbuf;
};

void zn_sha256_init(struct zn_sha256 *s);
void zn_sha256_update(struct zn_sha256 *s, const void *data, size_t len);
void zn_sha256_final(struct zn_sha256 *s, uint8_t out[ZN_SHA256_BYTES]);
void zn_sha256(const void *data, size_t len, uint8_t out[ZN_SHA256_BYTES]);

/* HMAC-SHA256 over the concatenation of nparts buffers (so that callers need not copy a
 * message together first). */
void zn_hmac_sha256(const void *key, size_t key_len, const void *const *part, const size_t *len,
                    int nparts, uint8_t out[ZN_SHA256_BYTES]);

/* 1 if the len bytes at a and b are equal, in time that does not depend on where they differ
 * (a MAC compared with memcmp tells a prober how many leading bytes it got right). */
int zn_ct_equal(const void *a, const void *b, size_t len);

/* The nonces a listener has taken, so that a handshake captured and replayed on a new
 * connection is refused. Only messages whose MAC verified are recorded, so a stranger cannot
 * grow the set. */
struct zn_nonce_set {
    uint8_t (*seen)[32];
    int n, cap;
};
/* 1 if nonce was taken before; else records it and returns 0 (-1: out of memory). */
int zn_nonce_seen(struct zn_nonce_set *s, const uint8_t nonce[32]);
void zn_nonce_set_free(struct zn_nonce_set *s);

#endif
