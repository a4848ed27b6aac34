/*
 * The net transport's objects, shared by its files:
 *   net.c       the ops table, init / fini / abort, the listener and the identification of
 *               accepted connections
 *   net_data.c  connection setup, isend / irecv / progress: chunks through staging slots
 *
 * Objects. One nt_state per communicator holds the net's per-communicator context, one
 * listen comm (its handle is allgathered at init, so connect() needs no exchange later) and a
 * table of nt_conn indexed by (peer, channel). A nt_conn is one transport connection: a net
 * send comm this rank connected to the peer's listener, and a net recv comm the peer connected
 * to ours. The first message on every send comm is a HELLO naming the sender's rank and
 * channel: accepted recv comms wait in `pending` until it arrives, then join their nt_conn
 * (created then if this rank has not called connect() for it yet).
 *
 * Data. Each direction of a connection owns NSLOTS staging slots of (header + chunk) bytes,
 * registered with the net once. A message of any size is cut into chunks (at least one, so
 * that zero-byte messages travel); each chunk is copied into a free slot behind a small header
 * and posted with isend, several in flight. The receiver keeps an irecv posted on every free
 * slot, so chunks land in posting order; the header of a message's first chunk carries the
 * message length, checked against the posted receive.
 *
 * Direct mode, for the socket net (regIsGlobal, and its registration records nothing):
 * staging copies every byte twice more than the kernel already does, CPU time a host that
 * runs its ranks on few cores lacks. There a message travels as a header
 * (kind, seq, length: a slot entry) followed by its chunks sent from and received into the
 * user's buffers, each registered for the time it is in flight. The receiver posts the chunks
 * of a message once its header has arrived and been checked against the posted receive, so
 * an abort or a length mismatch is always read into a slot, never into user memory.
 */
#ifndef ZN_TRANSPORT_NET_INTERNAL_H
#define ZN_TRANSPORT_NET_INTERNAL_H

#include "net/net_layer.h"
#include "transport.h"
#include "util/err.h"

#include <stdint.h>

#define NT_MAX_SLOTS 16
#define NT_HDR_BYTES 16
#define NT_TAG       0x7a6e /* every transport message; order, not tags, pairs them */

/* Chunk header (little-endian host order, both ends run the same build):
 *   0         4         8                 16
 *   +---------+---------+-----------------+
 *   | kind    | seq     | message length  |
 *   +---------+---------+-----------------+
 * kind: NT_DATA (payload = part of message `seq`) or NT_ABORT (payload = the reason). */
enum { NT_DATA = 0x4e544431u, NT_ABORT = 0x4e544142u };

/* HELLO, the first message on a send comm. */
#define NT_HELLO_MAGIC   0x4f4c4c45484e5a4eull /* "NZHELLO" */
#define NT_HELLO_VERSION 1
struct nt_hello {
    uint64_t magic;
    uint64_t comm_hash;
    uint32_t version;
    int32_t rank; /* the sender */
    int32_t to;   /* the rank it means to reach */
    int32_t channel;
};

/* What every rank allgathers at init. */
struct nt_addr {
    char net[32];
    uint8_t handle[NCCL_NET_HANDLE_MAXSIZE];
};

/* One direction's staging slots. */
struct nt_dir {
    char *buf; /* nslots * (NT_HDR_BYTES + chunk), page aligned */
    void *mh;  /* its registration with the comm */
    void *req[NT_MAX_SLOTS];
    int size[NT_MAX_SLOTS];              /* recv: bytes a completed slot holds; -1: not yet known */
    struct zn_req *owner[NT_MAX_SLOTS];  /* send: the request whose chunk the slot carries */
    int last[NT_MAX_SLOTS];              /* that chunk is the request's last */
    int pay[NT_MAX_SLOTS];               /* payload bytes of the chunk (staging: behind a header) */
    struct zn_req *rowner[NT_MAX_SLOTS]; /* direct recv: the request the chunk lands in */
    void *umh[NT_MAX_SLOTS]; /* direct: the user buffer's registration; NULL: a slot entry */
    int head, n;             /* slots in flight: [head, head + n) */
    int staged;              /* send: slot head + n holds a chunk isend has not taken yet */
};

struct nt_state;

struct nt_conn {
    struct zn_conn_hdr hdr; /* first: the layer above reads it */
    struct nt_state *st;
    int connected;  /* connect() was called (else a peer's HELLO created it) */
    int setup_over; /* ready or failed: not counted in nt_state.unready */
    int hello_sent; /* the HELLO's isend completed */
    int64_t deadline;
    uint8_t handle[NCCL_NET_HANDLE_MAXSIZE]; /* the peer's listen handle: connect state */
    void *send_comm, *recv_comm;
    struct nt_dir s, r;

    struct zn_req *sq_head, *sq_tail, *scur; /* scur: next request to cut into chunks */
    size_t soff;                             /* bytes of scur already staged */
    uint32_t send_seq;
    struct zn_req *rq_head, *rq_tail;
    size_t roff; /* bytes of rq_head already received */
    uint32_t recv_seq;
    /* Direct mode (nt_state.direct) only. */
    int shdr;             /* scur's header is posted; its chunks follow */
    int rhdr;             /* a header receive is in the ring */
    struct zn_req *rnext; /* the oldest receive whose header has not arrived */
    struct zn_req *rpost; /* the receive whose chunks are being posted */
    size_t rpost_off;     /* bytes of rpost posted so far */

    ncclResult_t err;
    char errmsg[ZN_ERRMSG_MAX];
};

/* An accepted recv comm whose HELLO has not arrived yet. */
struct nt_pending {
    void *comm;
    void *mh;
    void *req;
    struct nt_hello *hello; /* page-aligned buffer registered as mh */
};

struct nt_state {
    struct zn_tctx ctx;
    const struct zn_net *net;
    void *nctx; /* the net's per-communicator context */
    int dev;
    size_t chunk;
    int nslots;
    int direct; /* chunks go from / to the user's buffers, registered per chunk */
    void *listen_comm;
    struct nt_addr *addrs;  /* every rank's */
    struct nt_conn **conns; /* [peer * ZN_NCHANNELS + channel] */
    struct nt_pending *pending;
    int npending, cap_pending;
    int unready; /* connections still being set up */
    int strays;  /* accepted connections closed for a HELLO not of this communicator */
    int64_t next_accept;
};

static inline const ncclNet_t *nt_ops(const struct nt_state *st)
{
    return st->net->ops;
}

static inline int nt_ready(const struct nt_conn *c)
{
    return c->send_comm && c->recv_comm && c->hello_sent && c->r.buf;
}

/* net.c */
const char *zn_nt_channel_name(int channel);
ncclResult_t zn_nt_fail(struct nt_conn *c, ncclResult_t code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
ncclResult_t zn_nt_sticky(struct nt_conn *c);
void zn_nt_setup_over(struct nt_conn *c);
ncclResult_t zn_nt_conn_get(struct nt_state *st, int peer, int channel, int create,
                            struct nt_conn **out);
/* Accept recv comms and read their HELLOs (all connections share the listener). */
void zn_nt_accept_poll(struct nt_state *st, int *progressed);
/* Allocate and register one direction's slots on comm. */
ncclResult_t zn_nt_dir_open(struct nt_state *st, void *comm, struct nt_dir *d);
void zn_nt_conn_close(struct nt_conn *c);

/* net_data.c */
ncclResult_t zn_nt_connect(void *state, int peer, int channel, struct zn_conn **out);
ncclResult_t zn_nt_isend(struct zn_conn *conn, const void *buf, size_t len, struct zn_req *req);
ncclResult_t zn_nt_irecv(struct zn_conn *conn, void *buf, size_t len, struct zn_req *req);
ncclResult_t zn_nt_progress(struct zn_conn *conn, int *progressed);
/* Best effort: an NT_ABORT chunk with msg, waited for briefly. */
void zn_nt_send_abort(struct nt_conn *c, const char *msg);

#endif
