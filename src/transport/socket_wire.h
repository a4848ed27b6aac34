/*
 * The socket transport's wire format: what goes over a TCP connection between two ranks.
 * Pure encode/decode functions with no state, so that a fuzz target can drive the decoders
 * with arbitrary bytes. All integers are little-endian and encoded byte by byte, so the
 * buffers need no alignment.
 *
 * Connection setup. The lower rank of a pair opens nsocks TCP connections to the higher
 * rank's transport listener; on each it writes a HELLO and waits for the ACK that the higher
 * rank writes back once it has matched the HELLO to its (peer, channel) connection. Both are
 * the same 32-byte record:
 *
 *    0               8       10      12              16              20              24
 *    +---------------+-------+-------+---------------+---------------+---------------+
 *    | magic         |version| kind  | from          | to            | channel       |
 *    | u64           | u16   | u16   | i32           | i32           | u32           |
 *    +-------+-------+-------+-------+---------------+---------------+---------------+
 *    | sock  |nsocks | reserved (0)  |
 *    | u16   | u16   | u32           |
 *    +-------+-------+---------------+
 *    24      26      28              32
 *
 *    magic    the communicator's comm_hash: a connection from another job is rejected
 *    version  ZN_SOCKET_WIRE_VERSION; a mismatch is rejected (ranks run the same build)
 *    kind     ZN_SOCKET_HELLO (lower rank -> higher) or ZN_SOCKET_ACK (the answer)
 *    from, to the writer's and the reader's rank
 *    channel  enum zn_channel of the connection
 *    sock     index of this TCP connection within the (peer, channel) connection
 *    nsocks   TCP connections per (peer, channel) the writer uses; both sides must agree
 *
 * The ACK exists so that the lower rank also learns about a rejection it can name (an nsocks
 * mismatch) instead of seeing only a closed socket; it costs one round trip at setup.
 *
 * Data. Every message is one frame per TCP connection it uses, a 16-byte header followed by
 * the payload:
 *
 *    0                               8               12      13      14      15      16
 *    +-------------------------------+---------------+-------+-------+-------+-------+
 *    | length: total message bytes   | seq           | flags | part  |nparts | mark  |
 *    | u64                           | u32           | u8    | u8    | u8    | u8    |
 *    +-------------------------------+---------------+-------+-------+-------+-------+
 *    | payload: the bytes of this part of the message ...                            |
 *    +-------------------------------------------------------------------------------+
 *
 *    length   the length of the whole message (not of this part), so that every part can
 *             check it against the posted receive
 *    seq      message number on this connection and direction, from 0, wrapping
 *    flags    ZN_SOCKET_FRAME_STRIPED, or ZN_SOCKET_FRAME_ABORT alone; no other bit
 *
 * An ABORT frame (flags = ZN_SOCKET_FRAME_ABORT, part 0 of 1, seq unused) carries up to
 * ZN_SOCKET_ABORT_MAX bytes of text: the sender failed and says why, so that a rank waiting on
 * it reports the original cause (typically the rank that died) rather than a closed socket.
 * It is sent only on socket 0, only between frames.
 *    part     this part's index; it travels on TCP connection `part`
 *    nparts   1, or nsocks for a striped message
 *    mark     ZN_SOCKET_FRAME_MARK: catches a stream that lost its framing
 *
 * A message shorter than the striping threshold travels whole on connection 0. A longer one
 * (with nsocks > 1) is cut into nparts contiguous parts, part i on connection i, so that the
 * receiver reads each part straight into its place in the user buffer. Part i covers
 * [offset(i), offset(i) + size(i)) as computed by zn_socket_part(): the first length % nparts
 * parts are one byte longer than the rest. The threshold is the sender's choice and is not part
 * of the format; the receiver follows the flags.
 */
#ifndef ZN_TRANSPORT_SOCKET_WIRE_H
#define ZN_TRANSPORT_SOCKET_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define ZN_SOCKET_WIRE_VERSION 1
#define ZN_SOCKET_MAX_NSOCKS   8

/* HELLO / ACK */
#define ZN_SOCKET_HELLO_BYTES 32
enum zn_socket_hello_kind { ZN_SOCKET_HELLO = 1, ZN_SOCKET_ACK = 2 };

struct zn_socket_hello {
    uint64_t magic;
    uint16_t version;
    uint16_t kind;
    int32_t from;
    int32_t to;
    uint32_t channel;
    uint16_t sock;
    uint16_t nsocks;
};

/* Frames */
#define ZN_SOCKET_FRAME_BYTES   16
#define ZN_SOCKET_FRAME_STRIPED 0x01u
#define ZN_SOCKET_FRAME_ABORT   0x02u
#define ZN_SOCKET_ABORT_MAX     1024
#define ZN_SOCKET_FRAME_MARK    0x5au

struct zn_socket_frame {
    uint64_t length;
    uint32_t seq;
    uint8_t flags;
    uint8_t part;
    uint8_t nparts;
};

/* Why a decode failed (negative return values of the decoders). */
enum zn_socket_wire_err {
    ZN_SOCKET_WIRE_OK = 0,
    ZN_SOCKET_WIRE_ELEN = -1,     /* buffer of the wrong size */
    ZN_SOCKET_WIRE_EMAGIC = -2,   /* not this communicator's magic (or not zinc at all) */
    ZN_SOCKET_WIRE_EVERSION = -3, /* another wire version */
    ZN_SOCKET_WIRE_EFIELD = -4,   /* a field out of its range */
    ZN_SOCKET_WIRE_EMARK = -5,    /* frame marker missing: the stream lost its framing */
};

/* A short English description of a zn_socket_wire_err, for log messages. */
const char *zn_socket_wire_strerror(int err);

/* Write h (with version = ZN_SOCKET_WIRE_VERSION) into out[ZN_SOCKET_HELLO_BYTES]. */
void zn_socket_hello_encode(const struct zn_socket_hello *h, void *out);

/* Decode and validate a HELLO or ACK. Checks the size, the magic, the version, the kind,
 * non-negative ranks, nsocks in [1, ZN_SOCKET_MAX_NSOCKS], sock < ZN_SOCKET_MAX_NSOCKS and a
 * zero reserved field; the caller checks what needs context (ranks against nranks, channel,
 * sock against nsocks). Returns 0 with *out filled, or a negative zn_socket_wire_err. */
int zn_socket_hello_decode(const void *buf, size_t len, uint64_t magic,
                           struct zn_socket_hello *out);

/* Write f into out[ZN_SOCKET_FRAME_BYTES]. */
void zn_socket_frame_encode(const struct zn_socket_frame *f, void *out);

/* Decode and validate a frame header: the marker, known flags only, nparts in
 * [1, ZN_SOCKET_MAX_NSOCKS], part < nparts, a message that is not striped has exactly one part,
 * and a striped one has at least two, each at least one byte long. Returns 0 with *out filled
 * or a negative zn_socket_wire_err. */
int zn_socket_frame_decode(const void *buf, size_t len, struct zn_socket_frame *out);

/* Offset and size of part `part` of a message of `length` bytes cut into nparts parts. */
static inline void zn_socket_part(uint64_t length, unsigned nparts, unsigned part, uint64_t *offset,
                                  uint64_t *size)
{
    uint64_t base = length / nparts, rem = length % nparts;
    *offset = base * part + (part < rem ? part : rem);
    *size = base + (part < rem ? 1 : 0);
}

#endif
