/*
 * IB net: the handshake message's encoder and decoder (format in ib.h). Kept apart from the
 * verbs code so that the fuzz target (tests/fuzz/fuzz_ib_wire.c) builds it alone.
 */
#include "net/ib.h"
#include "util/hmac.h"

#include <errno.h>
#include <string.h>

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8);
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

void zn_net_ib_wire_encode(const struct zn_ib_wire *w, uint8_t out[ZN_IB_WIRE_BYTES])
{
    memset(out, 0, ZN_IB_WIRE_BYTES);
    put32(out, ZN_IB_WIRE_MAGIC);
    put16(out + 4, ZN_IB_WIRE_VERSION);
    put16(out + 6, (uint16_t)w->nqps);
    put32(out + 8, ZN_IB_WIRE_BODY);
    put64(out + 12, w->listen_magic);
    uint8_t *b = out + ZN_IB_WIRE_HDR;
    put16(b, w->lid);
    b[2] = w->link_layer;
    b[3] = w->mtu;
    put32(b + 4, w->rkey);
    put64(b + 8, w->addr);
    memcpy(b + 16, w->gid, 16);
    for (uint32_t i = 0; i < w->nqps && i < ZN_IB_MAX_QPS; i++) put32(b + 32 + 4 * i, w->qpn[i]);
    memcpy(out + ZN_IB_WIRE_HDR + ZN_IB_WIRE_BODY, w->nonce, 32);
    memcpy(out + ZN_IB_WIRE_HDR + ZN_IB_WIRE_BODY + 32, w->mac, 32);
}

int zn_net_ib_wire_decode(const uint8_t *buf, size_t len, struct zn_ib_wire *w, const char **why)
{
    *why = NULL;
    if (len < ZN_IB_WIRE_HDR)
        *why = "short header";
    else if (get(buf, 4) != ZN_IB_WIRE_MAGIC)
        *why = "bad magic";
    else if (get(buf + 4, 2) != ZN_IB_WIRE_VERSION)
        *why = "unknown version";
    else if (get(buf + 8, 4) != ZN_IB_WIRE_BODY || len < ZN_IB_WIRE_BYTES)
        *why = "bad length";
    if (*why) return -EPROTO;
    struct zn_ib_wire v;
    memset(&v, 0, sizeof(v));
    v.nqps = (uint32_t)get(buf + 6, 2);
    v.listen_magic = get(buf + 12, 8);
    const uint8_t *b = buf + ZN_IB_WIRE_HDR;
    v.lid = (uint16_t)get(b, 2);
    v.link_layer = b[2];
    v.mtu = b[3];
    v.rkey = (uint32_t)get(b + 4, 4);
    v.addr = get(b + 8, 8);
    memcpy(v.gid, b + 16, 16);
    if (v.nqps < 1 || v.nqps > ZN_IB_MAX_QPS)
        *why = "queue pair count out of range";
    else if (v.link_layer != IBV_LINK_LAYER_INFINIBAND && v.link_layer != IBV_LINK_LAYER_ETHERNET)
        *why = "unknown link layer";
    else if (v.mtu < IBV_MTU_256 || v.mtu > IBV_MTU_4096)
        *why = "bad MTU";
    if (*why) return -EPROTO;
    for (uint32_t i = 0; i < v.nqps; i++) v.qpn[i] = (uint32_t)get(b + 32 + 4 * i, 4) & 0xffffff;
    memcpy(v.nonce, buf + ZN_IB_WIRE_HDR + ZN_IB_WIRE_BODY, 32);
    memcpy(v.mac, buf + ZN_IB_WIRE_HDR + ZN_IB_WIRE_BODY + 32, 32);
    *w = v;
    return 0;
}

static void wire_mac(const uint8_t *msg, const uint8_t *key, uint8_t *out)
{
    static const char label[] = "zinc-ib-hello";
    const void *part[2] = { label, msg };
    size_t len[2] = { sizeof(label) - 1, ZN_IB_WIRE_BYTES - 32 };
    zn_hmac_sha256(key, ZN_IB_KEY_BYTES, part, len, 2, out);
}

void zn_net_ib_wire_sign(uint8_t msg[ZN_IB_WIRE_BYTES], const uint8_t key[ZN_IB_KEY_BYTES])
{
    wire_mac(msg, key, msg + ZN_IB_WIRE_BYTES - 32);
}

int zn_net_ib_wire_verify(const uint8_t msg[ZN_IB_WIRE_BYTES], const uint8_t key[ZN_IB_KEY_BYTES])
{
    uint8_t want[32];
    wire_mac(msg, key, want);
    return zn_ct_equal(want, msg + ZN_IB_WIRE_BYTES - 32, sizeof(want));
}
