/*
 * Bootstrap wire format. Every message on every bootstrap socket (rank to root, ring, point to
 * point) is one frame:
 *
 *    0          4          8                    16                   24
 *    +----------+----------+--------------------+--------------------+-- payload (len bytes)
 *    |  type    | version  |     job magic      |        len         |
 *    +----------+----------+--------------------+--------------------+--
 *
 * Integers are little-endian host order (bootstrap never crosses architectures in practice;
 * the version field guards against mixing zinc builds). A receiver checks magic, version,
 * type and len against the limit for that type before it reads a payload byte, so a stray or
 * hostile connection can neither make it allocate nor make it read past a buffer.
 *
 * CHALLENGE payload (first frame of every connection, from the side that accepted it): a
 * random nonce of 32 bytes.
 * HELLO payload (the connecting side's answer; nothing else is taken before it):
 *    +--------+--------+--------+--------+---------------------------+----------------------+
 *    | rank   | nranks | kind   | flags  | listen address (32 bytes) | MAC (32 bytes)       |
 *    +--------+--------+--------+--------+---------------------------+----------------------+
 * MAC = HMAC-SHA256(job secret, "zinc-boot-hello" | magic | nonce | the first 48 bytes): it
 * proves that the sender knows the job secret (bootstrap.h) without sending it, binds the
 * rank and address it claims, and cannot be replayed on another connection (new nonce).
 * RING_INFO payload (root to rank): nranks, pad, address of the next rank (32 bytes).
 * ERROR / ABORT payload: ncclResult_t code (4 bytes) then text (no terminator).
 * DATA payload: tag (4 bytes), pad (4 bytes), then data.
 * After RING_INFO, a rank whose HELLO to the root had flag ZN_HELLO_WANT_TABLE gets one DATA
 * frame more (tag ZN_BOOT_TAG_ADDRS): every rank's listening address, nranks union zn_sockaddr
 * in rank order. Rank 0 asks for it and passes it on down a tree (coll.c).
 * BYE payload: the sender's rank (4 bytes). Last frame on the ring connection of a rank that
 * closes its bootstrap normally: the successor then knows that the end of that connection is
 * not a death.
 *
 * Version 2 added BYE (ring data moved to point-to-point connections; the ring watches deaths).
 * Version 3 added CHALLENGE and the HELLO's MAC.
 */
#ifndef ZN_BOOTSTRAP_WIRE_H
#define ZN_BOOTSTRAP_WIRE_H

#include "util/sock.h"
#include "nccl.h"

#include <stddef.h>
#include <stdint.h>

#define ZN_BOOT_VERSION 3

enum zn_boot_type {
    ZN_BOOT_HELLO = 1,
    ZN_BOOT_RING_INFO = 2,
    ZN_BOOT_ERROR = 3, /* root to rank: init failed */
    ZN_BOOT_DATA = 4,
    ZN_BOOT_ABORT = 5,     /* rank to ring neighbour: the job failed, here is why */
    ZN_BOOT_BYE = 6,       /* rank to ring successor: closing normally */
    ZN_BOOT_CHALLENGE = 7, /* listener to connecting side: the nonce its HELLO must sign */
};

#define ZN_BOOT_NONCE_BYTES  32
#define ZN_BOOT_SECRET_BYTES 32
#define ZN_BOOT_MAC_BYTES    32

enum zn_boot_hello_kind { ZN_HELLO_ROOT = 1, ZN_HELLO_RING = 2, ZN_HELLO_P2P = 3 };
#define ZN_HELLO_WANT_TABLE 1u
#define ZN_BOOT_TAG_ADDRS   0x42410000u /* "BA": the address table, from the root or a parent */

struct zn_boot_frame {
    uint32_t type;
    uint32_t version;
    uint64_t magic;
    uint64_t len;
};
_Static_assert(sizeof(struct zn_boot_frame) == 24, "frame header is 24 bytes on the wire");

#define ZN_WIRE_ADDR_BYTES 32
struct zn_boot_hello {
    int32_t rank;
    int32_t nranks;
    uint32_t kind;
    uint32_t flags; /* ZN_HELLO_WANT_TABLE, to the root */
    uint8_t addr[ZN_WIRE_ADDR_BYTES];
    uint8_t mac[ZN_BOOT_MAC_BYTES];
};
_Static_assert(sizeof(struct zn_boot_hello) == 80, "hello is 80 bytes on the wire");
_Static_assert(sizeof(union zn_sockaddr) <= ZN_WIRE_ADDR_BYTES, "address fits its wire field");

struct zn_boot_ring_info {
    int32_t nranks;
    int32_t pad;
    uint8_t next_addr[ZN_WIRE_ADDR_BYTES];
};

#define ZN_BOOT_MAX_ERROR 1024         /* text of ERROR / ABORT frames */
#define ZN_BOOT_MAX_DATA  (256u << 20) /* a single bootstrap data message */

/* Check a received frame header. Returns 0, or -EBADMSG (wrong magic or version: not our
 * job), -EPROTO (unexpected type) or -EMSGSIZE (len above max_len for its type). */
int zn_boot_frame_check(const struct zn_boot_frame *f, uint64_t magic, uint32_t want_type,
                        uint64_t max_len);

/* The largest payload a frame of this type may carry (0: the type is unknown). */
uint64_t zn_boot_type_max_len(uint32_t type);

/* Decode a HELLO payload of len bytes. Returns 0 or -EPROTO (wrong size, kind out of range,
 * rank outside [0, nranks), nranks < 1, address family not IPv4/IPv6). */
int zn_boot_hello_decode(const void *payload, size_t len, struct zn_boot_hello *out,
                         union zn_sockaddr *addr);
void zn_boot_hello_encode(struct zn_boot_hello *h, int rank, int nranks, uint32_t kind,
                          const union zn_sockaddr *addr);
/* Fill h->mac for the listener's nonce; check it (1: the sender knows secret). */
void zn_boot_hello_sign(struct zn_boot_hello *h, const uint8_t secret[ZN_BOOT_SECRET_BYTES],
                        uint64_t magic, const uint8_t nonce[ZN_BOOT_NONCE_BYTES]);
int zn_boot_hello_verify(const struct zn_boot_hello *h, const uint8_t secret[ZN_BOOT_SECRET_BYTES],
                         uint64_t magic, const uint8_t nonce[ZN_BOOT_NONCE_BYTES]);
/* On a connection just accepted: draw a nonce into nonce and send it in a CHALLENGE frame
 * without blocking (a new socket's buffer always has room). 0 or a negative errno. */
int zn_boot_send_challenge(int fd, uint64_t magic, uint8_t nonce[ZN_BOOT_NONCE_BYTES]);

/* Incremental reader of one frame from a non-blocking socket: used wherever a server must
 * serve several connections at once without letting a slow one block the others. */
struct zn_frame_reader {
    struct zn_boot_frame hdr;
    size_t hdr_got;
    uint8_t *payload; /* allocated once the header checked out */
    size_t payload_got;
};
/* Read what is available. Returns 1 when a whole frame is in r (payload owned by r), 0 if more
 * is needed, or a negative errno (-EPIPE on EOF, or a frame_check error). want_type 0 accepts
 * any known type. */
int zn_frame_reader_step(struct zn_frame_reader *r, int fd, uint64_t magic, uint32_t want_type);
void zn_frame_reader_reset(struct zn_frame_reader *r);

/* Send one frame (header + payload parts) with a deadline. */
int zn_boot_send_frame(int fd, uint32_t type, uint64_t magic, const void *p1, size_t n1,
                       const void *p2, size_t n2, int64_t deadline, const atomic_int *abort_flag);

#endif
