/* Bootstrap frame encoding and the bounds-checked decoders (fuzzed by tests/fuzz). */
#include "wire.h"
#include "util/hmac.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/uio.h>

uint64_t zn_boot_type_max_len(uint32_t type)
{
    switch (type) {
    case ZN_BOOT_HELLO: return sizeof(struct zn_boot_hello);
    case ZN_BOOT_RING_INFO: return sizeof(struct zn_boot_ring_info);
    case ZN_BOOT_ERROR:
    case ZN_BOOT_ABORT: return 4 + ZN_BOOT_MAX_ERROR;
    case ZN_BOOT_DATA: return 8 + (uint64_t)ZN_BOOT_MAX_DATA;
    case ZN_BOOT_BYE: return 4;
    case ZN_BOOT_CHALLENGE: return ZN_BOOT_NONCE_BYTES;
    default: return 0;
    }
}

int zn_boot_frame_check(const struct zn_boot_frame *f, uint64_t magic, uint32_t want_type,
                        uint64_t max_len)
{
    if (f->magic != magic || f->version != ZN_BOOT_VERSION) return -EBADMSG;
    uint64_t type_max = zn_boot_type_max_len(f->type);
    if (type_max == 0) return -EPROTO;
    /* Errors and aborts may arrive in place of any expected frame. */
    if (want_type && f->type != want_type && f->type != ZN_BOOT_ERROR && f->type != ZN_BOOT_ABORT)
        return -EPROTO;
    if (f->len > type_max || (max_len && f->len > max_len && f->type == want_type))
        return -EMSGSIZE;
    return 0;
}

int zn_boot_hello_decode(const void *payload, size_t len, struct zn_boot_hello *out,
                         union zn_sockaddr *addr)
{
    struct zn_boot_hello h;
    if (len != sizeof(h)) return -EPROTO;
    memcpy(&h, payload, sizeof(h));
    if (h.nranks < 1 || h.rank < 0 || h.rank >= h.nranks) return -EPROTO;
    if (h.kind < ZN_HELLO_ROOT || h.kind > ZN_HELLO_P2P) return -EPROTO;
    union zn_sockaddr a;
    memset(&a, 0, sizeof(a));
    memcpy(&a, h.addr, sizeof(a));
    if (a.sa.sa_family != AF_INET && a.sa.sa_family != AF_INET6) return -EPROTO;
    *out = h;
    if (addr) *addr = a;
    return 0;
}

void zn_boot_hello_encode(struct zn_boot_hello *h, int rank, int nranks, uint32_t kind,
                          const union zn_sockaddr *addr)
{
    memset(h, 0, sizeof(*h));
    h->rank = rank;
    h->nranks = nranks;
    h->kind = kind;
    /* Only the address's own bytes: the rest of the union may never have been written (the
     * HELLO goes on the wire, and stack bytes must not). */
    if (addr) memcpy(h->addr, addr, zn_sockaddr_len(addr));
}

static void hello_mac(const struct zn_boot_hello *h, const uint8_t *secret, uint64_t magic,
                      const uint8_t *nonce, uint8_t out[ZN_BOOT_MAC_BYTES])
{
    static const char label[] = "zinc-boot-hello";
    const void *part[4] = { label, &magic, nonce, h };
    size_t len[4] = { sizeof(label) - 1, sizeof(magic), ZN_BOOT_NONCE_BYTES,
                      offsetof(struct zn_boot_hello, mac) };
    zn_hmac_sha256(secret, ZN_BOOT_SECRET_BYTES, part, len, 4, out);
}

void zn_boot_hello_sign(struct zn_boot_hello *h, const uint8_t secret[ZN_BOOT_SECRET_BYTES],
                        uint64_t magic, const uint8_t nonce[ZN_BOOT_NONCE_BYTES])
{
    hello_mac(h, secret, magic, nonce, h->mac);
}

int zn_boot_hello_verify(const struct zn_boot_hello *h, const uint8_t secret[ZN_BOOT_SECRET_BYTES],
                         uint64_t magic, const uint8_t nonce[ZN_BOOT_NONCE_BYTES])
{
    uint8_t want[ZN_BOOT_MAC_BYTES];
    hello_mac(h, secret, magic, nonce, want);
    return zn_ct_equal(want, h->mac, sizeof(want));
}

int zn_boot_send_challenge(int fd, uint64_t magic, uint8_t nonce[ZN_BOOT_NONCE_BYTES])
{
    if (getrandom(nonce, ZN_BOOT_NONCE_BYTES, 0) != ZN_BOOT_NONCE_BYTES) return -EIO;
    struct {
        struct zn_boot_frame f;
        uint8_t nonce[ZN_BOOT_NONCE_BYTES];
    } m = { .f = { .type = ZN_BOOT_CHALLENGE,
                   .version = ZN_BOOT_VERSION,
                   .magic = magic,
                   .len = ZN_BOOT_NONCE_BYTES } };
    memcpy(m.nonce, nonce, ZN_BOOT_NONCE_BYTES);
    size_t n = 0;
    int rc = zn_sock_send_some(fd, &m, sizeof(m), &n);
    return rc ? rc : n == sizeof(m) ? 0 : -EAGAIN;
}

void zn_frame_reader_reset(struct zn_frame_reader *r)
{
    free(r->payload);
    memset(r, 0, sizeof(*r));
}

int zn_frame_reader_step(struct zn_frame_reader *r, int fd, uint64_t magic, uint32_t want_type)
{
    size_t n;
    int rc;
    while (r->hdr_got < sizeof(r->hdr)) {
        rc = zn_sock_recv_some(fd, (char *)&r->hdr + r->hdr_got, sizeof(r->hdr) - r->hdr_got, &n);
        if (rc) return rc;
        if (n == 0) return 0;
        r->hdr_got += n;
        if (r->hdr_got == sizeof(r->hdr)) {
            rc = zn_boot_frame_check(&r->hdr, magic, want_type, 0);
            if (rc) return rc;
            /* Allocate only after the length passed its bound. */
            r->payload = malloc(r->hdr.len ? r->hdr.len : 1);
            if (!r->payload) return -ENOMEM;
        }
    }
    while (r->payload_got < r->hdr.len) {
        rc = zn_sock_recv_some(fd, r->payload + r->payload_got, r->hdr.len - r->payload_got, &n);
        if (rc) return rc;
        if (n == 0) return 0;
        r->payload_got += n;
    }
    return 1;
}

int zn_boot_send_frame(int fd, uint32_t type, uint64_t magic, const void *p1, size_t n1,
                       const void *p2, size_t n2, int64_t deadline, const atomic_int *abort_flag)
{
    struct zn_boot_frame f = {
        .type = type, .version = ZN_BOOT_VERSION, .magic = magic, .len = n1 + n2
    };
    int rc = zn_sock_send_all(fd, &f, sizeof(f), deadline, abort_flag);
    if (!rc && n1) rc = zn_sock_send_all(fd, p1, n1, deadline, abort_flag);
    if (!rc && n2) rc = zn_sock_send_all(fd, p2, n2, deadline, abort_flag);
    return rc;
}
