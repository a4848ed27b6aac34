/*
 * The socket net's wire formats. Everything a peer sends is decoded here and checked before
 * use (tests/fuzz/fuzz_net_socket_wire.c fuzzes these decoders).
 *
 * Listen handle (inside NCCL's 128-byte opaque handle; it travels through the layer above,
 * zinc's authenticated bootstrap or NCCL's):
 *
 *   0        4        6        8                16                      44          76
 *   +--------+--------+--------+----------------+-----------------------+-----------+
 *   | "ZNSK" | version| nstrm  | magic (random) | listener address      | key (32)  |
 *   +--------+--------+--------+----------------+-----------------------+-----------+
 *
 * Hello: the first bytes the connecting side writes on every TCP stream of a connection, so
 * that the listener can group the streams (conn_id) and reject strangers (magic, MAC):
 *
 *   0         4        6        8               16              24       26   28  32      64    96
 *   +---------+--------+--------+---------------+---------------+--------+----+---+-------+-----+
 *   | len=96  | version| stream | magic         | conn_id       | nstrm  | 0  | 0 | nonce | MAC |
 *   +---------+--------+--------+---------------+---------------+--------+----+---+-------+-----+
 *
 * MAC = HMAC-SHA256(the handle's key, "zinc-nsock-hello" | the first 64 bytes): the stream
 * comes from a rank that was given the handle. The nonce is random; the listener takes each
 * once, so that a captured hello replayed on a new stream is refused. Rejected: a challenge
 * from the listener first, which would make connect() wait for accept() (a caller may run
 * both ends in one thread, each to completion). Version 2 added the key, nonce and MAC.
 *
 * Message header: sent on the control stream (stream 0) before each message's payload; the
 * payload follows on stream 0 or, with helper threads, in chunks over the data streams:
 *
 *   0         4        6        8       12      16
 *   +---------+--------+--------+-------+-------+-----------------+
 *   | len=24  | version| kind   | tag   | 0     | size (u64)      |
 *   +---------+--------+--------+-------+-------+-----------------+
 *
 * All integers are little-endian host order (both ends run zinc on the same architecture;
 * the version field catches a peer that does not).
 */
#ifndef ZN_NET_SOCKET_WIRE_H
#define ZN_NET_SOCKET_WIRE_H

#include "util/sock.h"

#include <stddef.h>
#include <stdint.h>

#define ZN_NSOCK_VERSION     2
#define ZN_NSOCK_HANDLE_TAG  0x4b534e5au /* "ZNSK" */
#define ZN_NSOCK_HELLO_LEN   96
#define ZN_NSOCK_KEY_LEN     32
#define ZN_NSOCK_HDR_LEN     24
#define ZN_NSOCK_MAX_STREAMS 65 /* the control stream and at most 64 data streams */
#define ZN_NSOCK_KIND_MSG    1

struct zn_nsock_handle {
    uint32_t tag;
    uint16_t version;
    uint16_t nstreams; /* data streams the listener expects per connection */
    uint64_t magic;
    union zn_sockaddr addr;
    uint8_t key[ZN_NSOCK_KEY_LEN];
};

struct zn_nsock_hello {
    uint16_t stream; /* 0: control, 1..nstreams: data */
    uint16_t nstreams;
    uint64_t magic;
    uint64_t conn_id;
    uint8_t nonce[32];
};

struct zn_nsock_hdr {
    int32_t tag;
    uint64_t size;
};

void zn_nsock_handle_encode(const struct zn_nsock_handle *h, void *out /* 128 bytes */);
/* 0, or -EINVAL when the bytes are not a socket-net handle of this version. */
int zn_nsock_handle_decode(const void *buf, size_t len, struct zn_nsock_handle *h);

/* The MAC is written with key. */
void zn_nsock_hello_encode(const struct zn_nsock_hello *h, const uint8_t key[ZN_NSOCK_KEY_LEN],
                           uint8_t out[ZN_NSOCK_HELLO_LEN]);
/* 1 if the hello's MAC was made with key. */
int zn_nsock_hello_verify(const uint8_t hello[ZN_NSOCK_HELLO_LEN],
                          const uint8_t key[ZN_NSOCK_KEY_LEN]);
/* 0; -EPROTO (length or version), -EACCES (magic differs from want_magic), -ERANGE (stream
 * numbers out of range). */
int zn_nsock_hello_decode(const uint8_t *buf, size_t len, uint64_t want_magic,
                          struct zn_nsock_hello *h);

void zn_nsock_hdr_encode(const struct zn_nsock_hdr *h, uint8_t out[ZN_NSOCK_HDR_LEN]);
/* 0; -EPROTO (length, version or kind), -EMSGSIZE (size above max_size). */
int zn_nsock_hdr_decode(const uint8_t *buf, size_t len, uint64_t max_size, struct zn_nsock_hdr *h);

#endif
