/* The socket transport's wire format: encoders and the validating decoders (socket_wire.h). */
#include "socket_wire.h"

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint16_t get16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static uint32_t get32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

const char *zn_socket_wire_strerror(int err)
{
    switch (err) {
    case ZN_SOCKET_WIRE_OK: return "no error";
    case ZN_SOCKET_WIRE_ELEN: return "wrong size";
    case ZN_SOCKET_WIRE_EMAGIC: return "wrong magic (another job, or not zinc)";
    case ZN_SOCKET_WIRE_EVERSION: return "another wire version (ranks run different builds?)";
    case ZN_SOCKET_WIRE_EFIELD: return "a field out of range";
    case ZN_SOCKET_WIRE_EMARK: return "frame marker missing (the stream lost its framing)";
    default: return "unknown error";
    }
}

void zn_socket_hello_encode(const struct zn_socket_hello *h, void *out)
{
    uint8_t *p = out;
    put64(p + 0, h->magic);
    put16(p + 8, ZN_SOCKET_WIRE_VERSION);
    put16(p + 10, h->kind);
    put32(p + 12, (uint32_t)h->from);
    put32(p + 16, (uint32_t)h->to);
    put32(p + 20, h->channel);
    put16(p + 24, h->sock);
    put16(p + 26, h->nsocks);
    put32(p + 28, 0);
}

int zn_socket_hello_decode(const void *buf, size_t len, uint64_t magic, struct zn_socket_hello *out)
{
    if (!buf || len != ZN_SOCKET_HELLO_BYTES) return ZN_SOCKET_WIRE_ELEN;
    const uint8_t *p = buf;
    struct zn_socket_hello h;
    h.magic = get64(p + 0);
    /* The magic first: a stranger's bytes are reported as such, not as a bad field. */
    if (h.magic != magic) return ZN_SOCKET_WIRE_EMAGIC;
    h.version = get16(p + 8);
    if (h.version != ZN_SOCKET_WIRE_VERSION) return ZN_SOCKET_WIRE_EVERSION;
    h.kind = get16(p + 10);
    h.from = (int32_t)get32(p + 12);
    h.to = (int32_t)get32(p + 16);
    h.channel = get32(p + 20);
    h.sock = get16(p + 24);
    h.nsocks = get16(p + 26);
    uint32_t reserved = get32(p + 28);
    if (h.kind != ZN_SOCKET_HELLO && h.kind != ZN_SOCKET_ACK) return ZN_SOCKET_WIRE_EFIELD;
    if (h.from < 0 || h.to < 0) return ZN_SOCKET_WIRE_EFIELD;
    if (h.nsocks < 1 || h.nsocks > ZN_SOCKET_MAX_NSOCKS) return ZN_SOCKET_WIRE_EFIELD;
    if (h.sock >= ZN_SOCKET_MAX_NSOCKS || reserved != 0) return ZN_SOCKET_WIRE_EFIELD;
    *out = h;
    return ZN_SOCKET_WIRE_OK;
}

void zn_socket_frame_encode(const struct zn_socket_frame *f, void *out)
{
    uint8_t *p = out;
    put64(p + 0, f->length);
    put32(p + 8, f->seq);
    p[12] = f->flags;
    p[13] = f->part;
    p[14] = f->nparts;
    p[15] = ZN_SOCKET_FRAME_MARK;
}

int zn_socket_frame_decode(const void *buf, size_t len, struct zn_socket_frame *out)
{
    if (!buf || len != ZN_SOCKET_FRAME_BYTES) return ZN_SOCKET_WIRE_ELEN;
    const uint8_t *p = buf;
    if (p[15] != ZN_SOCKET_FRAME_MARK) return ZN_SOCKET_WIRE_EMARK;
    struct zn_socket_frame f;
    f.length = get64(p + 0);
    f.seq = get32(p + 8);
    f.flags = p[12];
    f.part = p[13];
    f.nparts = p[14];
    if (f.flags == ZN_SOCKET_FRAME_ABORT) {
        if (f.nparts != 1 || f.part != 0 || f.length > ZN_SOCKET_ABORT_MAX)
            return ZN_SOCKET_WIRE_EFIELD;
        *out = f;
        return ZN_SOCKET_WIRE_OK;
    }
    if (f.flags & ~ZN_SOCKET_FRAME_STRIPED) return ZN_SOCKET_WIRE_EFIELD;
    if (f.nparts < 1 || f.nparts > ZN_SOCKET_MAX_NSOCKS || f.part >= f.nparts)
        return ZN_SOCKET_WIRE_EFIELD;
    if (f.flags & ZN_SOCKET_FRAME_STRIPED) {
        /* Every part of a striped message carries at least one byte, which is what lets the
         * receiver count bytes to know that all parts arrived. */
        if (f.nparts < 2 || f.length < f.nparts) return ZN_SOCKET_WIRE_EFIELD;
    } else if (f.nparts != 1) {
        return ZN_SOCKET_WIRE_EFIELD;
    }
    *out = f;
    return ZN_SOCKET_WIRE_OK;
}
