/*
 * State shared by the files of the socket transport (not seen outside it):
 *   socket.c        the ops table, init / fini, the listener
 *   socket_common.c the helpers below (errors, the connection table)
 *   socket_conn.c   connect(), accepting and identifying connections, the HELLO / ACK exchange
 *   socket_data.c   isend / irecv / progress: frames, striping, errors on the data path
 *
 * Objects. One zs_state per communicator holds the listener, every rank's listener address
 * and a table of zs_conn indexed by (peer, channel). A zs_conn is one logical connection to a
 * peer on a channel, made of nsocks TCP connections (zs_sock). Sockets accepted on the
 * listener whose HELLO has not been read yet are zs_pending entries of the state; a complete,
 * valid HELLO moves the socket into its zs_conn (created then if this rank has not called
 * connect() for it yet).
 */
#ifndef ZN_TRANSPORT_SOCKET_INTERNAL_H
#define ZN_TRANSPORT_SOCKET_INTERNAL_H

#include "socket.h"
#include "socket_wire.h"
#include "transport.h"
#include "util/err.h"
#include "util/sock.h"

#include <stdint.h>

/* Messages at least this long are striped over all sockets of a connection (nsocks > 1).
 * Below it one socket is faster: striping costs a header and a syscall per socket. */
#define ZS_STRIPE_MIN (256 * 1024)

/* While every connection is set up, the listener is only looked at this often (strays,
 * early HELLOs); an accept4() per progress call would cost a syscall on the data path. */
#define ZS_IDLE_ACCEPT_NS (10 * 1000 * 1000)

/* At most this many accepted sockets may wait for their HELLO; more are closed at once. */
#define ZS_MAX_PENDING 1024

enum zs_sock_state {
    ZS_EMPTY = 0,  /* no TCP connection (acceptor: not arrived yet) */
    ZS_RETRY,      /* initiator: the last connect failed; try again at retry_at */
    ZS_CONNECTING, /* initiator: non-blocking connect in flight */
    ZS_HELLO_SEND, /* initiator: writing the HELLO */
    ZS_ACK_RECV,   /* initiator: reading the ACK */
    ZS_ACK_SEND,   /* acceptor: writing the ACK */
    ZS_READY,      /* carrying frames */
};

/* One TCP connection of a zs_conn. Cursors into the connection's request queues say which
 * message this socket works on in each direction; NULL means "caught up": the next request
 * posted becomes the cursor (zs_enqueue). */
struct zs_sock {
    int fd;
    int state; /* enum zs_sock_state */

    /* Setup. */
    int64_t retry_at;
    int backoff_ms;
    int last_err; /* negative errno of the last failed connect, for the timeout message */
    uint8_t hello[ZN_SOCKET_HELLO_BYTES];
    size_t hello_off;

    /* Send direction: scur is the next message with a part on this socket. */
    struct zn_req *scur;
    size_t shdr_off; /* header bytes of scur's frame already written */
    size_t spay_off; /* payload bytes of scur's part already written */

    /* Receive direction. Socket 0 carries a frame of every message: rcur is the first
     * request whose header has not arrived. Other sockets carry parts of striped messages
     * only: rcur is where the search for the request of the next header starts. */
    struct zn_req *rcur;
    struct zn_req *rreq; /* the request the current frame's payload goes to; NULL: header */
    uint8_t rhdr[ZN_SOCKET_FRAME_BYTES];
    size_t rhdr_got;
    int rhdr_ok; /* rhdr is decoded into rframe and waits for its request to be posted */
    struct zn_socket_frame rframe;
    uint64_t roff, rlen, rgot; /* the current part: offset, size, bytes already read */
    uint32_t rseq_next;        /* socket 0: the seq the next header must carry */
    int eof;                   /* the peer closed this socket at a frame boundary */
};

struct zs_state;

struct zs_conn {
    struct zn_conn_hdr hdr; /* first: the layer above reads it */
    struct zs_state *st;
    int nsocks;
    int initiator;  /* this rank has the lower number: it opens the TCP connections */
    int connected;  /* connect() was called for it (else it was created by a peer's HELLO) */
    int nready;     /* sockets in ZS_READY */
    int setup_over; /* ready or failed: no longer counted in zs_state.unready */
    int64_t deadline;
    int peer_closed; /* the peer closed at a message boundary while nothing was pending */
    ncclResult_t err;
    char errmsg[ZN_ERRMSG_MAX];

    /* Request queues, FIFO per direction; seq numbers count posted requests. */
    struct zn_req *sq_head, *sq_tail;
    struct zn_req *rq_head, *rq_tail;
    uint32_t send_seq, recv_seq;

    struct zs_sock socks[ZN_SOCKET_MAX_NSOCKS];
};

/* An accepted socket whose HELLO is still being read. */
struct zs_pending {
    int fd;
    size_t got;
    int64_t since;
    uint8_t buf[ZN_SOCKET_HELLO_BYTES];
};

struct zs_state {
    struct zn_tctx ctx; /* a copy; ctx.peers stays valid for the state's lifetime */
    int nsocks;
    size_t bufsize;
    int lfd;
    union zn_sockaddr laddr;
    union zn_sockaddr *addrs; /* every rank's listener */
    struct zs_conn **conns;   /* [peer * ZN_NCHANNELS + channel] */
    struct zs_pending *pending;
    int npending, cap_pending;
    int unready; /* connections with sockets still being set up */
    int64_t next_accept;
};

static inline int zn_socket_conn_ready(const struct zs_conn *c)
{
    return c->nready == c->nsocks;
}

const char *zn_socket_channel_name(int channel);

/* "rank 3 (host, pid 1234)" for the peer of c. */
void zn_socket_peer_str(const struct zs_conn *c, char *buf, size_t len);

/* c is ready or failed: stop counting it among the connections being set up. */
void zn_socket_setup_over(struct zs_conn *c);

/* The connection for (peer, channel); with create, make it if it does not exist. */
ncclResult_t zn_socket_conn_get(struct zs_state *st, int peer, int channel, int create,
                                struct zs_conn **out);

/* Fail c for good: log and record the error once, remember it for later calls. */
ncclResult_t zn_socket_fail(struct zs_conn *c, ncclResult_t code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The error c failed with, recorded again as this thread's last error. */
ncclResult_t zn_socket_sticky(struct zs_conn *c);

/* socket_conn.c */
ncclResult_t zn_socket_connect(void *state, int peer, int channel, struct zn_conn **out);
/* Accept and identify incoming sockets (all connections share the listener). */
void zn_socket_accept_poll(struct zs_state *st, int *progressed);
/* Move c's setup on; fails c when its deadline passes. */
ncclResult_t zn_socket_setup_progress(struct zs_conn *c, int *progressed);
void zn_socket_conn_close(struct zs_conn *c);

/* socket_data.c */
ncclResult_t zn_socket_isend(struct zn_conn *conn, const void *buf, size_t len, struct zn_req *req);
ncclResult_t zn_socket_irecv(struct zn_conn *conn, void *buf, size_t len, struct zn_req *req);
ncclResult_t zn_socket_progress(struct zn_conn *conn, int *progressed);
void zn_socket_send_abort(struct zs_conn *c, const char *msg);

#endif
