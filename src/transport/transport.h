/*
 * Transports: point-to-point byte streams between two ranks of a communicator.
 *
 * Every transport is one `static const struct zn_transport_ops` table (registry.c lists them).
 * A transport sees only a zn_tctx -- rank, peers' public info, the out-of-band bootstrap and
 * the abort flag -- never the communicator, so tests/transport drives each one alone.
 *
 * Model. A connection joins this rank and one peer on one channel (collectives and user
 * send/recv use different channels so that their messages never interleave). Both ranks call
 * connect() for the pair, in any order and at any time; setup then completes inside progress().
 * Sends and receives are posted as requests and complete in posting order per connection and
 * direction. Every message carries its length, so a receive posted with another size fails
 * with ncclInvalidUsage instead of corrupting data. Zero-byte messages are legal and still
 * travel (they keep both sides' message order in step).
 *
 * Threads. All ops are called by the thread driving the communicator (the user thread for host
 * communicators); a connection is never used by two threads at once. Only init() and fini()
 * block (bounded by ZINC_TIMEOUT); data-path ops never block.
 */
#ifndef ZN_TRANSPORT_H
#define ZN_TRANSPORT_H

#include "bootstrap/bootstrap.h"
#include "nccl.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* What every rank tells every other rank at init (allgathered over the bootstrap). */
#define ZN_HOSTNAME_MAX 64
struct zn_peer_info {
    int32_t rank;
    int32_t pid;
    uint64_t host_hash; /* equal on ranks that share a host (and its /dev/shm and memory) */
    uint64_t pid_start; /* process start time, so a recycled pid is not mistaken for the rank */
    uint64_t nonce;     /* random per rank and init: rank 0's makes the communicator's hash */
    int32_t cuda_dev;   /* -1 for host communicators */
    uint32_t pidns;     /* pid namespace (inode of /proc/self/ns/pid; 0: unknown) */
    char hostname[ZN_HOSTNAME_MAX];
    char bus_id[20]; /* PCI bus id of the rank's GPU ("" for host communicators) */
    uint32_t pad2;
};

/* The narrow context a transport gets. */
struct zn_tctx {
    int rank, nranks;
    const struct zn_peer_info *peers; /* nranks entries */
    struct zn_boot *boot;             /* out-of-band allgather / send / recv */
    uint64_t comm_hash;               /* unique per communicator: names shm segments etc. */
    const atomic_int *abort_flag;
};

enum zn_req_state { ZN_REQ_PENDING = 0, ZN_REQ_DONE = 1 };

/* A posted send or receive. The caller owns the memory and keeps it alive until it is done;
 * the transport fills the private part. */
struct zn_req {
    void *buf;
    size_t len;
    size_t done; /* bytes moved so far */
    int state;   /* enum zn_req_state */
    int is_send;
    struct zn_req *next; /* the transport's per-connection queue */
    uint64_t priv[4];
};

struct zn_conn; /* each transport defines its own, beginning with struct zn_conn_hdr */
struct zn_conn_hdr {
    const struct zn_transport_ops *ops;
    int peer;
    int channel;
};

enum zn_channel { ZN_CH_COLL = 0, ZN_CH_P2P = 1, ZN_NCHANNELS = 2 };

struct zn_transport_ops {
    const char *name;
    /* Whether this transport can carry traffic between ctx->rank and peer. Pure. */
    int (*can_connect)(const struct zn_tctx *ctx, int peer);
    /* Per-communicator setup. Collective: every rank of the communicator calls it, in the same
     * order as the other transports (may use the bootstrap). Blocks, bounded by the deadline. */
    ncclResult_t (*init)(const struct zn_tctx *ctx, void **state);
    /* Start (or find) the connection to peer on channel. Never blocks. */
    ncclResult_t (*connect)(void *state, int peer, int channel, struct zn_conn **conn);
    /* Post a send / receive. Never blocks. */
    ncclResult_t (*isend)(struct zn_conn *c, const void *buf, size_t len, struct zn_req *req);
    ncclResult_t (*irecv)(struct zn_conn *c, void *buf, size_t len, struct zn_req *req);
    /* Move data on the connection; completes requests. Never blocks. Sets *progressed to 1 if
     * anything moved (never clears it; the caller's no-progress deadline uses it). A dead or
     * misbehaving peer returns ncclRemoteError with a message naming its rank and host; so
     * does a peer that aborted (with its reason). After an error the connection is dead for
     * good: requests still posted on it are never touched again and may be freed. Setup of a
     * transport's connections may share state (one listener), so progress on one connection
     * can advance the setup of another. */
    ncclResult_t (*progress)(struct zn_conn *c, int *progressed);
    /* This rank failed (msg says why, naming the original cause): tell every peer that has a
     * connection, best effort and briefly, so that peers waiting on this rank fail with the
     * real reason instead of a timeout. The state stays valid for fini. */
    void (*abort)(void *state, const char *msg);
    /* Tear down every connection and the state. Does not block for long (peers may be gone). */
    void (*fini)(void *state);
};

/* The built-in transports, in registry order. */
extern const struct zn_transport_ops zn_transport_shm;
extern const struct zn_transport_ops zn_transport_socket;

/* "rank 3 (hostname, pid 1234)" for messages. */
void zn_peer_str(const struct zn_tctx *ctx, int peer, char *buf, size_t len);

/* A stub for table slots a transport does not support. */
ncclResult_t zn_transport_unsupported(const char *transport, const char *op);

#endif
