/* State shared by the files of the bootstrap layer (not seen above it). */
#ifndef ZN_BOOTSTRAP_INTERNAL_H
#define ZN_BOOTSTRAP_INTERNAL_H

#include "bootstrap.h"
#include "wire.h"

#include <stddef.h>

/* A connection someone opened to our listener: it got our CHALLENGE, its HELLO is read first
 * (src stays -1 until then, and nothing else is taken), after which it carries DATA frames
 * from rank src. An unproven one is closed at its deadline. */
struct boot_in {
    int fd;
    int src;
    struct zn_frame_reader rd;
    uint8_t nonce[ZN_BOOT_NONCE_BYTES];
    int64_t deadline;
    size_t queued; /* bytes of its DATA waiting in the unexpected list */
    char from[ZN_SOCKADDR_STRLEN];
};

/* What one source may have waiting in the unexpected list before its connection is no longer
 * read (until zn_boot_recv takes some): with the 256 MB frame in flight, what a rank (or a
 * buggy one) can make another buffer is bounded. */
#define ZN_BOOT_MAX_QUEUED (64u << 20)

/* A point-to-point message that arrived before its zn_boot_recv. */
struct boot_msg {
    int src;
    int conn_fd; /* the connection it came on, for its queued count */
    uint32_t tag;
    size_t len;
    uint8_t *data;
    struct boot_msg *next;
};

struct zn_boot {
    int rank, nranks;
    uint64_t magic;
    uint8_t secret[ZN_BOOT_SECRET_BYTES];
    const atomic_int *abort_flag;
    struct zn_boot_listener l;
    int next_fd, prev_fd;
    /* The predecessor's ring connection: read by the address exchange, and watched during
     * every other wait for ABORT, BYE or its end (a death, unless BYE came first). */
    struct zn_frame_reader prev_rd;
    int prev_watch;           /* 0 once the predecessor said BYE or its connection ended */
    int prev_strict;          /* its end without BYE fails the bootstrap (0 after zn_boot_reopen) */
    union zn_sockaddr *addrs; /* every rank's listening address */
    int *send_fd;             /* outgoing point-to-point connections, -1 until first use */
    struct boot_in *in;
    int nin, incap;
    struct boot_msg *unexpected, **unexpected_tail;
    int failed;
    ncclResult_t fail_code;
    struct zn_boot_stats stats;
};

/* One wait of the bootstrap: optionally a frame to write on send_fd and a frame to read from
 * recv_fd, while serving incoming point-to-point connections; ends when both are done or
 * until() says so. */
struct boot_io {
    int send_fd;
    const void *part[3];
    size_t len[3];
    size_t sent;
    int recv_fd;
    struct zn_frame_reader *rd;
    uint32_t want_type; /* of the frame read on recv_fd; 0: DATA */
    int (*until)(struct zn_boot *b, void *arg);
    void *until_arg;
    int blame_send, blame_recv; /* ranks named if that side fails */
    const char *what;
};

static inline void zn_boot_count_sent(struct zn_boot *b, size_t bytes)
{
    b->stats.msgs_sent++;
    b->stats.bytes_sent += bytes;
}

/* A whole frame arrived in rd. */
static inline void zn_boot_count_recv(struct zn_boot *b, const struct zn_frame_reader *rd)
{
    b->stats.msgs_recv++;
    b->stats.bytes_recv += sizeof(rd->hdr) + rd->hdr.len;
}

ncclResult_t zn_boot_io_run(struct zn_boot *b, struct boot_io *io);
/* Fail the bootstrap with a message naming rank peer, and tell the ring neighbour. */
ncclResult_t zn_boot_fail_peer(struct zn_boot *b, ncclResult_t code, int peer, const char *what,
                               int err);
void zn_boot_peer_str(const struct zn_boot *b, int peer, char *buf, size_t len);

/* A bootstrap with no connections yet (listener closed, addresses unknown). */
ncclResult_t zn_boot_alloc(uint64_t magic, const uint8_t *secret, int rank, int nranks,
                           const atomic_int *abort_flag, struct zn_boot **out);
/* On a connection this rank opened (fd) to rank peer: read the listener's CHALLENGE (serving
 * our own listener meanwhile) and make the HELLO of this kind that answers it. */
ncclResult_t zn_boot_hello_make(struct zn_boot *b, int fd, uint32_t kind, int peer,
                                const char *what, struct zn_boot_hello *h);
/* A queued message was taken: its connection may be read again. */
void zn_boot_unqueue(struct zn_boot *b, const struct boot_msg *m);
/* Learn every rank's address, knowing our successor's (after zn_boot_ring_connect), and rank 0
 * every address already if rank0_has_all (the same on every rank). */
ncclResult_t zn_boot_share_addrs(struct zn_boot *b, int rank0_has_all);
/* Connect to the successor at next and wait for the predecessor's connection. */
ncclResult_t zn_boot_ring_connect(struct zn_boot *b, const union zn_sockaddr *next);

#endif
