/*
 * libFuzzer target: the socket transport's wire decoders (src/transport/socket_wire.h), the
 * HELLO/ACK record and the data frame header, on arbitrary bytes.
 *
 * Each decoder gets the whole input (any length must be refused cleanly unless it is the
 * exact size) and then its exact-size prefix, once with a fixed magic and once with the magic
 * the bytes themselves carry (so that the field checks are reached). Whatever is accepted must
 * be in range, must encode back to the same bytes, and, for a frame, its parts must tile the
 * message. (Written against the format as of the ABORT frame, ZN_SOCKET_FRAME_ABORT.)
 */
#include "transport/socket_wire.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_MAGIC 0x7a696e632d66757aull

#define REQUIRE(c)         \
    do {                   \
        if (!(c)) abort(); \
    } while (0)

static void check_code(int rc)
{
    REQUIRE(rc <= 0 && rc >= ZN_SOCKET_WIRE_EMARK);
    const char *s = zn_socket_wire_strerror(rc);
    REQUIRE(s != NULL && s[0] != 0);
}

static void hello(const uint8_t *buf, size_t len, uint64_t magic)
{
    struct zn_socket_hello h;
    int rc = zn_socket_hello_decode(buf, len, magic, &h);
    check_code(rc);
    if (rc != 0) return;
    REQUIRE(len == ZN_SOCKET_HELLO_BYTES);
    REQUIRE(h.magic == magic && h.version == ZN_SOCKET_WIRE_VERSION);
    REQUIRE(h.kind == ZN_SOCKET_HELLO || h.kind == ZN_SOCKET_ACK);
    REQUIRE(h.from >= 0 && h.to >= 0);
    REQUIRE(h.nsocks >= 1 && h.nsocks <= ZN_SOCKET_MAX_NSOCKS && h.sock < ZN_SOCKET_MAX_NSOCKS);
    uint8_t again[ZN_SOCKET_HELLO_BYTES];
    zn_socket_hello_encode(&h, again);
    REQUIRE(memcmp(again, buf, ZN_SOCKET_HELLO_BYTES) == 0);
}

static void frame(const uint8_t *buf, size_t len)
{
    struct zn_socket_frame f;
    int rc = zn_socket_frame_decode(buf, len, &f);
    check_code(rc);
    if (rc != 0) return;
    REQUIRE(len == ZN_SOCKET_FRAME_BYTES);
    REQUIRE(f.nparts >= 1 && f.nparts <= ZN_SOCKET_MAX_NSOCKS && f.part < f.nparts);
    /* Known flags only: STRIPED, or ABORT alone (one part of at most ZN_SOCKET_ABORT_MAX bytes
     * of text, which the receiver then reads into a buffer of that size). */
    if (f.flags == ZN_SOCKET_FRAME_ABORT)
        REQUIRE(f.nparts == 1 && f.part == 0 && f.length <= ZN_SOCKET_ABORT_MAX);
    else
        REQUIRE((f.flags & ~ZN_SOCKET_FRAME_STRIPED) == 0);
    uint8_t again[ZN_SOCKET_FRAME_BYTES];
    zn_socket_frame_encode(&f, again);
    REQUIRE(memcmp(again, buf, ZN_SOCKET_FRAME_BYTES) == 0);
    /* The parts tile [0, length) in order; a striped message's parts are never empty. */
    uint64_t next = 0;
    for (unsigned p = 0; p < f.nparts; p++) {
        uint64_t off, sz;
        zn_socket_part(f.length, f.nparts, p, &off, &sz);
        REQUIRE(off == next);
        REQUIRE(!(f.flags & ZN_SOCKET_FRAME_STRIPED) || sz >= 1);
        next = off + sz;
    }
    REQUIRE(next == f.length);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* Exact-size copies on the heap, so that ASan sees any read past the end. */
    uint8_t *all = malloc(size ? size : 1);
    memcpy(all, data, size);
    uint64_t own = 0;
    for (size_t i = 0; i < 8 && i < size; i++) own |= (uint64_t)data[i] << (8 * i);
    hello(all, size, FUZZ_MAGIC);
    hello(all, size, own);
    hello(size ? NULL : all, 0, own);
    frame(all, size);
    free(all);
    if (size >= ZN_SOCKET_HELLO_BYTES) {
        uint8_t *h = malloc(ZN_SOCKET_HELLO_BYTES);
        memcpy(h, data, ZN_SOCKET_HELLO_BYTES);
        hello(h, ZN_SOCKET_HELLO_BYTES, FUZZ_MAGIC);
        hello(h, ZN_SOCKET_HELLO_BYTES, own);
        free(h);
    }
    if (size >= ZN_SOCKET_FRAME_BYTES) {
        /* Every 16-byte window, so that frames later in the input are decoded too. */
        for (size_t o = 0; o + ZN_SOCKET_FRAME_BYTES <= size && o < 256; o += 16) {
            uint8_t *f = malloc(ZN_SOCKET_FRAME_BYTES);
            memcpy(f, data + o, ZN_SOCKET_FRAME_BYTES);
            frame(f, ZN_SOCKET_FRAME_BYTES);
            free(f);
        }
    }
    return 0;
}
