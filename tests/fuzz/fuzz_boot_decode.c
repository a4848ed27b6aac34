/*
 * libFuzzer target: the bootstrap's frame-header check and HELLO decoder (src/bootstrap/wire.h)
 * on arbitrary bytes.
 *
 * Input: a 24-byte frame header, one byte choosing the expected type, 8 bytes of max_len, then
 * the payload (what is missing reads as zeros). The header is checked against a fixed magic and
 * against its own magic field (so that the later checks are reached without guessing the
 * magic); the payload goes to zn_boot_hello_decode at its exact length, so that ASan catches a
 * read past its end. Whatever the decoders accept must satisfy the bounds they promise.
 */
#include "bootstrap/wire.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_MAGIC 0x7a696e632d66757aull

#define REQUIRE(c)         \
    do {                   \
        if (!(c)) abort(); \
    } while (0)

static void check_frame(const struct zn_boot_frame *f, uint64_t magic, uint32_t want,
                        uint64_t max_len)
{
    int rc = zn_boot_frame_check(f, magic, want, max_len);
    REQUIRE(rc == 0 || rc == -EBADMSG || rc == -EPROTO || rc == -EMSGSIZE);
    if (rc != 0) return;
    uint64_t type_max = zn_boot_type_max_len(f->type);
    REQUIRE(f->magic == magic && f->version == ZN_BOOT_VERSION);
    REQUIRE(type_max > 0 && f->len <= type_max);
    REQUIRE(want == 0 || f->type == want || f->type == ZN_BOOT_ERROR || f->type == ZN_BOOT_ABORT);
    if (max_len && f->type == want) REQUIRE(f->len <= max_len);
    /* Every accepted length is one a reader may allocate: at most a data message. */
    REQUIRE(f->len <= 8 + (uint64_t)ZN_BOOT_MAX_DATA);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t head[24 + 1 + 8];
    memset(head, 0, sizeof(head));
    size_t nhead = size < sizeof(head) ? size : sizeof(head);
    memcpy(head, data, nhead);
    struct zn_boot_frame f;
    memcpy(&f, head, sizeof(f));
    uint32_t want = head[24] % 9; /* 0 (any) and the 7 known types, and one unknown */
    uint64_t max_len;
    memcpy(&max_len, head + 25, 8);
    check_frame(&f, FUZZ_MAGIC, want, max_len);
    check_frame(&f, f.magic, want, max_len);
    check_frame(&f, f.magic, want, 0);

    /* The payload, in a buffer of its exact size. */
    size_t plen = size - nhead;
    uint8_t *payload = malloc(plen ? plen : 1);
    memcpy(payload, data + nhead, plen);
    struct zn_boot_hello h;
    union zn_sockaddr a;
    memset(&a, 0, sizeof(a));
    int rc = zn_boot_hello_decode(payload, plen, &h, &a);
    REQUIRE(rc == 0 || rc == -EPROTO);
    if (rc == 0) {
        REQUIRE(plen == sizeof(h));
        REQUIRE(h.nranks >= 1 && h.rank >= 0 && h.rank < h.nranks);
        REQUIRE(h.kind >= ZN_HELLO_ROOT && h.kind <= ZN_HELLO_P2P);
        REQUIRE(a.sa.sa_family == AF_INET || a.sa.sa_family == AF_INET6);
        /* Encoding what was decoded gives a HELLO that decodes the same. */
        struct zn_boot_hello h2, h3;
        zn_boot_hello_encode(&h2, h.rank, h.nranks, h.kind, &a);
        REQUIRE(zn_boot_hello_decode(&h2, sizeof(h2), &h3, NULL) == 0);
        REQUIRE(h3.rank == h.rank && h3.nranks == h.nranks && h3.kind == h.kind);
        /* A MAC made with one secret is taken with that secret only, and binds the fields. */
        uint8_t key[ZN_BOOT_SECRET_BYTES] = { 1 }, nonce[ZN_BOOT_NONCE_BYTES] = { 2 };
        zn_boot_hello_sign(&h2, key, FUZZ_MAGIC, nonce);
        REQUIRE(zn_boot_hello_verify(&h2, key, FUZZ_MAGIC, nonce));
        key[0] ^= 1;
        REQUIRE(!zn_boot_hello_verify(&h2, key, FUZZ_MAGIC, nonce));
    }
    REQUIRE(zn_boot_hello_decode(payload, plen, &h, NULL) == rc);
    free(payload);
    return 0;
}
