/* The socket net's wire formats: see socket_wire.h. */
#include "net/socket_wire.h"
#include "util/hmac.h"

#include <errno.h>
#include <string.h>

static void put16(uint8_t *p, uint16_t v)
{
    memcpy(p, &v, 2);
}
static void put32(uint8_t *p, uint32_t v)
{
    memcpy(p, &v, 4);
}
static void put64(uint8_t *p, uint64_t v)
{
    memcpy(p, &v, 8);
}
static uint16_t get16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}
static uint32_t get32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
static uint64_t get64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

void zn_nsock_handle_encode(const struct zn_nsock_handle *h, void *out)
{
    memset(out, 0, 128);
    memcpy(out, h, sizeof(*h));
}

int zn_nsock_handle_decode(const void *buf, size_t len, struct zn_nsock_handle *h)
{
    if (len < sizeof(*h)) return -EINVAL;
    struct zn_nsock_handle tmp;
    memcpy(&tmp, buf, sizeof(tmp));
    if (tmp.tag != ZN_NSOCK_HANDLE_TAG || tmp.version != ZN_NSOCK_VERSION) return -EINVAL;
    if (tmp.nstreams >= ZN_NSOCK_MAX_STREAMS) return -EINVAL;
    sa_family_t fam = tmp.addr.sa.sa_family;
    if (fam != AF_INET && fam != AF_INET6) return -EINVAL;
    *h = tmp;
    return 0;
}

static void hello_mac(const uint8_t *hello, const uint8_t *key, uint8_t *out)
{
    static const char label[] = "zinc-nsock-hello";
    const void *part[2] = { label, hello };
    size_t len[2] = { sizeof(label) - 1, ZN_NSOCK_HELLO_LEN - 32 };
    zn_hmac_sha256(key, ZN_NSOCK_KEY_LEN, part, len, 2, out);
}

int zn_nsock_hello_verify(const uint8_t hello[ZN_NSOCK_HELLO_LEN],
                          const uint8_t key[ZN_NSOCK_KEY_LEN])
{
    uint8_t want[32];
    hello_mac(hello, key, want);
    return zn_ct_equal(want, hello + ZN_NSOCK_HELLO_LEN - 32, sizeof(want));
}

void zn_nsock_hello_encode(const struct zn_nsock_hello *h, const uint8_t key[ZN_NSOCK_KEY_LEN],
                           uint8_t out[ZN_NSOCK_HELLO_LEN])
{
    memset(out, 0, ZN_NSOCK_HELLO_LEN);
    put32(out, ZN_NSOCK_HELLO_LEN);
    put16(out + 4, ZN_NSOCK_VERSION);
    put16(out + 6, h->stream);
    put64(out + 8, h->magic);
    put64(out + 16, h->conn_id);
    put16(out + 24, h->nstreams);
    memcpy(out + 32, h->nonce, 32);
    hello_mac(out, key, out + 64);
}

int zn_nsock_hello_decode(const uint8_t *buf, size_t len, uint64_t want_magic,
                          struct zn_nsock_hello *h)
{
    if (len != ZN_NSOCK_HELLO_LEN || get32(buf) != ZN_NSOCK_HELLO_LEN) return -EPROTO;
    if (get16(buf + 4) != ZN_NSOCK_VERSION) return -EPROTO;
    if (get16(buf + 26) != 0 || get32(buf + 28) != 0) return -EPROTO; /* reserved: zero */
    struct zn_nsock_hello tmp = {
        .stream = get16(buf + 6),
        .magic = get64(buf + 8),
        .conn_id = get64(buf + 16),
        .nstreams = get16(buf + 24),
    };
    memcpy(tmp.nonce, buf + 32, 32);
    if (tmp.magic != want_magic) return -EACCES;
    if (tmp.nstreams >= ZN_NSOCK_MAX_STREAMS || tmp.stream > tmp.nstreams) return -ERANGE;
    *h = tmp;
    return 0;
}

void zn_nsock_hdr_encode(const struct zn_nsock_hdr *h, uint8_t out[ZN_NSOCK_HDR_LEN])
{
    memset(out, 0, ZN_NSOCK_HDR_LEN);
    put32(out, ZN_NSOCK_HDR_LEN);
    put16(out + 4, ZN_NSOCK_VERSION);
    put16(out + 6, ZN_NSOCK_KIND_MSG);
    put32(out + 8, (uint32_t)h->tag);
    put64(out + 16, h->size);
}

int zn_nsock_hdr_decode(const uint8_t *buf, size_t len, uint64_t max_size, struct zn_nsock_hdr *h)
{
    if (len != ZN_NSOCK_HDR_LEN || get32(buf) != ZN_NSOCK_HDR_LEN) return -EPROTO;
    if (get16(buf + 4) != ZN_NSOCK_VERSION || get16(buf + 6) != ZN_NSOCK_KIND_MSG) return -EPROTO;
    if (get32(buf + 12) != 0) return -EPROTO; /* reserved: zero */
    uint64_t size = get64(buf + 16);
    if (size > max_size) return -EMSGSIZE;
    h->tag = (int32_t)get32(buf + 8);
    h->size = size;
    return 0;
}
