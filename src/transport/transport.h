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
#include "svc.h"
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
    uint64_t pid_ns;    /* pid namespace (inode of /proc/self/ns/pid; 0: unknown): in another
                         * namespace the rank's pid names some other process */
    uint64_t nonce;     /* random per rank and init: rank 0's makes the communicator's hash */
    int32_t cuda_dev;   /* -1 for host communicators */
    uint32_t pad;
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
    const struct zn_svc *svc; /* the process service (NULL: none, e.g. host-only tests) */
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

/* What a transport reports of itself (as UCX's iface_query): capabilities, and the latency and
 * bandwidth of one message, which protocol choice and the cost model may read. */
enum zn_transport_cap {
    ZN_TCAP_MSG = 1u << 0,     /* two-sided isend / irecv (every transport) */
    ZN_TCAP_REG = 1u << 1,     /* registers memory (reg / dereg do something) */
    ZN_TCAP_RMA = 1u << 2,     /* one-sided put / signal / flush (zn_transport_rma) */
    ZN_TCAP_COLLMEM = 1u << 3, /* collective memory (zn_transport_collmem) */
};
struct zn_transport_props {
    uint32_t caps;     /* enum zn_transport_cap bits */
    double latency_us; /* one message */
    double bw;         /* bytes per microsecond */
};

/* A transport's operations. Every slot is filled: a capability a transport lacks points at the
 * shared "unsupported" stub of that slot (below), never NULL. size grows the contract: a table
 * built against an older layout is refused by zn_transport_check instead of being read past
 * its end. */
struct zn_transport_ops {
    size_t size; /* sizeof(struct zn_transport_ops) */
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
    /* Capabilities, latency and bandwidth toward peer. Pure. */
    void (*query)(const struct zn_tctx *ctx, int peer, struct zn_transport_props *props);
    /* Register [buf, buf + len) for transfers and return a handle; undo it. Success with
     * *handle NULL: memory of a kind this transport does not register (nothing to undo). */
    ncclResult_t (*reg)(void *state, void *buf, size_t len, void **handle);
    ncclResult_t (*dereg)(void *state, void *handle);
};

/* What a peer must receive to address a region this rank registered (reg's handle), packed by
 * the owner and imported by the peer: opaque to everyone but the transport that made it, as
 * libfabric's memory keys are. size says how many bytes of data are meaningful. Also what one
 * side of a one-sided connection sends the other at setup (ep_open's descriptor: a net's
 * listen handle is 128 bytes). */
#define ZN_RMA_KEY_MAX 160
struct zn_rma_key {
    uint32_t size;
    uint32_t pad;
    uint8_t data[ZN_RMA_KEY_MAX];
};

/* A one-sided connection of its own (ep_open): this side's buffer, and where the peer's
 * signals land. */
struct zn_rma_ep_args {
    int peer;
    int tag;         /* the caller's name for the connection, in messages ("tag 3") */
    const char *dev; /* net: the device to use ("mlx5_0", "mlx5_0:1"); NULL: the net picks */
    void *buf;       /* this side's buffer: this side's puts read it, the peer's land in it */
    size_t len;
    /* The word the peer's signals store into, as this process reaches it (host memory; for
     * a GPU buffer, mapped pinned memory that kernels poll). */
    uint64_t *sig;
};

/* One-sided operations of a transport (in the style of libfabric's fi_ops_rma): a table of its
 * own, with its own size, reached through zn_transport_rma() so that transports without them
 * need no new slots. put and signal are only issued here: they complete in order per
 * connection, and flush waits until every one issued before it on c is complete (visible in
 * the peer's memory).
 *
 * Two ways in. (1) Through the main table: connections from its connect(), regions from its
 * reg(), keys from key_pack with the main table's state (p2p: cuda communicators). (2) On their
 * own (second version of the table), as libmscclpp uses them: a domain per caller
 * (domain_open) holds what its connections share; regions come from mem_reg / mem_alloc and
 * connections from ep_open, pairwise, any number per peer; state below is then the domain.
 * shm and net are reached only this way: their main-table connections carry messages. */
struct zn_transport_rma_ops {
    size_t size; /* sizeof(struct zn_transport_rma_ops) */
    const char *name;
    /* The key peers need to address the registered region handle (reg's or mem_reg's). User
     * thread; never blocks. */
    ncclResult_t (*key_pack)(void *state, void *handle, struct zn_rma_key *key);
    /* Map a region peer registered (its packed key) for puts and signals; undo it. User
     * thread; key_import may wait (bounded by the deadline) for the peer's memory to exist. */
    ncclResult_t (*key_import)(void *state, int peer, const struct zn_rma_key *key, void **remote);
    ncclResult_t (*key_release)(void *state, void *remote);
    /* Copy len bytes from local region + loff to the peer's region remote + roff. Never
     * blocks for the peer (a net queues it; a full queue is waited on, bounded). A net
     * connection joins one buffer on each side: its remote is NULL (the peer's buffer). */
    ncclResult_t (*put)(struct zn_conn *c, void *local, size_t loff, void *remote, size_t roff,
                        size_t len);
    /* Store value into the 64-bit word at remote + roff (8-byte aligned), after every put issued
     * before it on c. On a net connection remote is NULL and the word is the peer's sig
     * (zn_rma_ep_args). */
    ncclResult_t (*signal)(struct zn_conn *c, void *remote, size_t roff, uint64_t value);
    /* Block until every put and signal issued on c so far is complete (bounded). */
    ncclResult_t (*flush)(struct zn_conn *c);

    /* --- Second version: one-sided use on its own --------------------------------------- */
    /* The domain: ctx (copied; its peers, boot and abort flag must outlive the domain) says who
     * the peers are. User thread; never blocks. close frees what the domain mapped and made,
     * and every connection still open in it. */
    ncclResult_t (*domain_open)(const struct zn_tctx *ctx, void **dom);
    void (*domain_close)(void *dom);
    /* Memory of this rank that peers map (shm: a segment of its own, zeroed; nmappers processes
     * in all will map it, after which its name is gone): a region (handle) and its address. */
    ncclResult_t (*mem_alloc)(void *dom, size_t len, int nmappers, void **ptr, void **handle);
    void (*mem_free)(void *dom, void *handle);
    /* Make [buf, buf + len) a region of dom: what put reads from and key_pack describes. */
    ncclResult_t (*mem_reg)(void *dom, void *buf, size_t len, void **handle);
    void (*mem_dereg)(void *dom, void *handle);
    /* Where this process reaches an imported region with loads and stores; NULL where it
     * cannot (shm: memory of the peer's reached by cross-memory attach; net). *len (if not
     * NULL): the region's size as its key says. Pure. */
    void *(*remote_addr)(void *remote, size_t *len);
    /* A one-sided connection to a->peer: this side is made, and *desc is what the peer's
     * ep_connect takes. ep_connect takes the peer's descriptor and its buffer's size;
     * ep_establish finishes the setup without blocking (*done 1 when it has: then the
     * connection takes puts). User thread. */
    ncclResult_t (*ep_open)(void *dom, const struct zn_rma_ep_args *a, struct zn_conn **c,
                            struct zn_rma_key *desc);
    ncclResult_t (*ep_connect)(struct zn_conn *c, const struct zn_rma_key *peer_desc,
                               size_t peer_len);
    ncclResult_t (*ep_establish)(struct zn_conn *c, int *done);
    /* A put and a signal in one operation (a net sends them as one message). */
    ncclResult_t (*put_signal)(struct zn_conn *c, void *local, size_t loff, void *remote,
                               size_t roff, size_t len, void *sremote, size_t sroff,
                               uint64_t value);
    /* Move every connection of the domain on (a net's queued sends, its receives). Never
     * blocks; any thread (the proxy's progress thread, a host thread waiting). */
    void (*domain_progress)(void *dom);
    /* Whether c can still be waited on: its sticky error, or ncclRemoteError once the peer
     * exited or closed its side (what the caller's wait on a signal word needs to give up),
     * which becomes its sticky error; fn names the caller's operation in the message, and one
     * non-blocking call into the net may be made. fn NULL asks quietly: the sticky error as
     * known, nothing checked or logged. *closed (may be NULL): the peer closed its side. */
    ncclResult_t (*ep_check)(struct zn_conn *c, const char *fn, int *closed);
    void (*ep_close)(struct zn_conn *c);
};

/* What collective memory is to hold, for zn_transport_collmem's create. */
struct zn_collmem_args {
    size_t bytes;        /* per rank */
    int dev;             /* CUDA device for device memory; -1 for host memory */
    const uint8_t *want; /* nranks entries: which peers' memory to map (NULL: every peer) */
};

/* Collective memory: one region per rank that the other ranks of the communicator map and
 * reach with loads and stores (the shm transport's arena in /dev/shm, the p2p transport's in
 * device memory). create is collective and blocks, bounded by the deadline; the handle is the
 * transport's own type (transport/shm_arena.h, transport/gpu_peer.h say what it is). */
struct zn_transport_collmem_ops {
    size_t size; /* sizeof(struct zn_transport_collmem_ops) */
    const char *name;
    ncclResult_t (*create)(const struct zn_tctx *ctx, const struct zn_collmem_args *args,
                           void **mem);
    void (*destroy)(void *mem);
};

/* The built-in transports, in preference order: the first that can connect a peer (and is
 * not disabled) serves it (transport/registry.c). */
#define ZN_NTRANSPORTS 2
extern const struct zn_transport_ops *const zn_transports[ZN_NTRANSPORTS];
extern const struct zn_transport_ops zn_transport_shm;
extern const struct zn_transport_ops zn_transport_net; /* over a net of src/net: TCP, IB, plugins */
/* The p2p transport (GPU memory mapped between GPUs) carries no messages, so it is not among
 * zn_transports; setup of cuda communicators uses it (transport/gpu_peer.h). */
extern const struct zn_transport_ops zn_transport_p2p;

/* t's one-sided table; zn_transport_rma_unsupported (every slot an error naming the transport)
 * for a transport without them. Never NULL. */
const struct zn_transport_rma_ops *zn_transport_rma(const struct zn_transport_ops *t);
extern const struct zn_transport_rma_ops zn_transport_rma_unsupported;
/* t's collective memory, or NULL for a transport without it. */
const struct zn_transport_collmem_ops *zn_transport_collmem(const struct zn_transport_ops *t);

/* The table is of this build's size and fills every slot; else an error naming what is wrong. */
ncclResult_t zn_transport_check(const struct zn_transport_ops *t);
ncclResult_t zn_transport_rma_check(const struct zn_transport_rma_ops *t);
/* The one-sided tables of shm and net (transport/shm_rma.c, transport/net_rma.c; net.h has a
 * zn_net_rma of its own). */
extern const struct zn_transport_rma_ops zn_shm_rma;
extern const struct zn_transport_rma_ops zn_transport_net_rma;

/* The second version's slots of a one-sided table without one-sided use on its own (p2p's
 * host-issued puts need the main table's state): designated initializers for every one. */
ncclResult_t zn_rma_domain_open_unsupported(const struct zn_tctx *ctx, void **dom);
void zn_rma_domain_close_unsupported(void *dom);
ncclResult_t zn_rma_mem_alloc_unsupported(void *dom, size_t len, int nmappers, void **ptr,
                                          void **handle);
void zn_rma_mem_free_unsupported(void *dom, void *handle);
ncclResult_t zn_rma_mem_reg_unsupported(void *dom, void *buf, size_t len, void **handle);
void zn_rma_mem_dereg_unsupported(void *dom, void *handle);
void *zn_rma_remote_addr_unsupported(void *remote, size_t *len);
ncclResult_t zn_rma_ep_open_unsupported(void *dom, const struct zn_rma_ep_args *a,
                                        struct zn_conn **c, struct zn_rma_key *desc);
ncclResult_t zn_rma_ep_connect_unsupported(struct zn_conn *c, const struct zn_rma_key *peer_desc,
                                           size_t peer_len);
ncclResult_t zn_rma_ep_establish_unsupported(struct zn_conn *c, int *done);
ncclResult_t zn_rma_put_signal_unsupported(struct zn_conn *c, void *local, size_t loff,
                                           void *remote, size_t roff, size_t len, void *sremote,
                                           size_t sroff, uint64_t value);
void zn_rma_domain_progress_unsupported(void *dom);
ncclResult_t zn_rma_ep_check_unsupported(struct zn_conn *c, const char *fn, int *closed);
void zn_rma_ep_close_unsupported(struct zn_conn *c);
#define ZN_RMA_V2_UNSUPPORTED                                                                     \
    .domain_open = zn_rma_domain_open_unsupported,                                                \
    .domain_close = zn_rma_domain_close_unsupported, .mem_alloc = zn_rma_mem_alloc_unsupported,   \
    .mem_free = zn_rma_mem_free_unsupported, .mem_reg = zn_rma_mem_reg_unsupported,               \
    .mem_dereg = zn_rma_mem_dereg_unsupported, .remote_addr = zn_rma_remote_addr_unsupported,     \
    .ep_open = zn_rma_ep_open_unsupported, .ep_connect = zn_rma_ep_connect_unsupported,           \
    .ep_establish = zn_rma_ep_establish_unsupported, .put_signal = zn_rma_put_signal_unsupported, \
    .domain_progress = zn_rma_domain_progress_unsupported,                                        \
    .ep_check = zn_rma_ep_check_unsupported, .ep_close = zn_rma_ep_close_unsupported

/* The "unsupported" stubs of the optional slots. */
ncclResult_t zn_transport_reg_unsupported(void *state, void *buf, size_t len, void **handle);
ncclResult_t zn_transport_dereg_unsupported(void *state, void *handle);

/* "rank 3 (hostname, pid 1234)" for messages. */
void zn_peer_str(const struct zn_tctx *ctx, int peer, char *buf, size_t len);

/* A stub for table slots a transport does not support. */
ncclResult_t zn_transport_unsupported(const char *transport, const char *op);

#endif
