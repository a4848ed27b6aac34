/*
 * The InfiniBand / RoCE verbs net (internal header): libibverbs loaded with dlopen, devices and
 * ports, the connection handshake's wire format, and the communicators' state.
 *
 * Data moves receiver-driven, as in NCCL's IB net: each irecv writes its buffers' addresses,
 * sizes, rkeys and tags into a slot of the sender's FIFO by RDMA write; isend waits for that
 * slot, RDMA-writes the data straight into the posted buffer, then writes the sizes with an
 * immediate (the slot's sequence number) that completes the receive. A send therefore never
 * lands in memory that was not posted, and no bounce buffer is needed.
 *
 * Built only with rdma-core's headers (ZINC_HAVE_IBVERBS); the library itself is looked up at
 * run time, so a machine without libibverbs runs zinc on its other nets.
 */
#ifndef ZN_NET_IB_H
#define ZN_NET_IB_H

#include "net/nccl_net.h"
#include "util/sock.h"

#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

enum {
    ZN_IB_MAX_DEVS = 32,
    ZN_IB_MAX_REQS = NCCL_NET_MAX_REQUESTS, /* FIFO slots and requests per communicator */
    ZN_IB_MAX_RECVS = 8,                    /* buffers of one grouped receive */
    ZN_IB_MAX_QPS = 16,
    ZN_IB_SENDQ = ZN_IB_MAX_REQS * ZN_IB_MAX_RECVS, /* sends waiting for their FIFO slot */
};

/* In a size the sender writes: the send was larger than the receive it matched. */
#define ZN_IB_SIZE_REFUSED (1ull << 63)

/* ---------------------------------------------------------------------------------------
 * libibverbs entry points, looked up with dlsym. Only exported names: verbs.h turns some calls
 * into inline wrappers (ibv_query_port, ibv_reg_mr) around these exports, and the data-path
 * calls (ibv_post_send, ibv_post_recv, ibv_poll_cq) go through the context's ops table, so
 * those are used as the header defines them.
 * ------------------------------------------------------------------------------------- */
#define ZN_IBV_SYMBOLS(X)                                                                         \
    X(1, get_device_list, struct ibv_device **, (int *))                                          \
    X(1, free_device_list, void, (struct ibv_device **))                                          \
    X(1, get_device_name, const char *, (struct ibv_device *))                                    \
    X(1, get_device_guid, __be64, (struct ibv_device *))                                          \
    X(1, open_device, struct ibv_context *, (struct ibv_device *))                                \
    X(1, close_device, int, (struct ibv_context *))                                               \
    X(1, query_device, int, (struct ibv_context *, struct ibv_device_attr *))                     \
    X(1, query_port, int, (struct ibv_context *, uint8_t, struct _compat_ibv_port_attr *))        \
    X(1, query_gid, int, (struct ibv_context *, uint8_t, int, union ibv_gid *))                   \
    X(0, _query_gid_ex, int,                                                                      \
      (struct ibv_context *, uint32_t, uint32_t, struct ibv_gid_entry *, uint32_t, size_t))       \
    X(1, alloc_pd, struct ibv_pd *, (struct ibv_context *))                                       \
    X(1, dealloc_pd, int, (struct ibv_pd *))                                                      \
    X(1, reg_mr, struct ibv_mr *, (struct ibv_pd *, void *, size_t, int))                         \
    X(0, reg_dmabuf_mr, struct ibv_mr *, (struct ibv_pd *, uint64_t, size_t, uint64_t, int, int)) \
    X(1, dereg_mr, int, (struct ibv_mr *))                                                        \
    X(1, create_cq, struct ibv_cq *,                                                              \
      (struct ibv_context *, int, void *, struct ibv_comp_channel *, int))                        \
    X(1, destroy_cq, int, (struct ibv_cq *))                                                      \
    X(1, create_qp, struct ibv_qp *, (struct ibv_pd *, struct ibv_qp_init_attr *))                \
    X(1, modify_qp, int, (struct ibv_qp *, struct ibv_qp_attr *, int))                            \
    X(1, destroy_qp, int, (struct ibv_qp *))                                                      \
    X(1, get_async_event, int, (struct ibv_context *, struct ibv_async_event *))                  \
    X(1, ack_async_event, void, (struct ibv_async_event *))                                       \
    X(1, wc_status_str, const char *, (enum ibv_wc_status))                                       \
    X(1, event_type_str, const char *, (enum ibv_event_type))                                     \
    X(1, fork_init, int, (void))

struct zn_ibv {
#define ZN_IBV_FIELD(required, name, ret, args) ret(*name) args;
    ZN_IBV_SYMBOLS(ZN_IBV_FIELD)
#undef ZN_IBV_FIELD
};

extern struct zn_ibv zn_ibv;

/* One usable port: a device, its port and what the handshake needs to address it. */
struct zn_ib_dev {
    char name[64];
    int port;
    struct ibv_context *ctx; /* shared by the ports of one device */
    struct ibv_pd *pd;
    int link_layer; /* IBV_LINK_LAYER_INFINIBAND or _ETHERNET */
    uint16_t lid;
    int gid_index;
    union ibv_gid gid;
    enum ibv_mtu mtu;
    int speed_mbps;
    uint64_t guid;
    char pci_path[256];
    int dmabuf;          /* ibv_reg_dmabuf_mr is there and the device answers its probe */
    int16_t rail, plane; /* from ZINC_IB_HCA's item; NCCL_NET_ID_UNDEF when it names none */
    _Atomic int port_down;
    pthread_mutex_t lock; /* the registration cache */
    struct zn_ib_mr *mrs;
};

/* A registration, shared by the regMr calls whose pages it covers (the cache). */
struct zn_ib_mr {
    struct zn_ib_mr *next;
    struct zn_ib_dev *dev;
    uintptr_t start, end; /* page-aligned range registered */
    struct ibv_mr *mr;
    int refs;
    int type; /* NCCL_PTR_* */
};

/* The net's devices, found once by zn_net_ib_devices_init(). */
int zn_net_ib_ndevs(void);
struct zn_ib_dev *zn_net_ib_dev(int i);
/* Load libibverbs and list the usable ports. Returns 0 devices with *why set to the reason
 * (library missing, no device, every port down or filtered out); never fails otherwise. */
int zn_net_ib_devices_init(const char **why);

/* ZINC_IB_HCA / NCCL_IB_HCA matching, NCCL 2.30's syntax: comma-separated items
 * name[:port[:rail[:plane]]] ("mlx5_0:1,mlx5_1" are prefixes, the second any port); an empty
 * field is unset ("mlx5_0::3": every port of mlx5_0, on rail 3); a leading ^ excludes, a
 * leading = (after any ^) makes names exact. Empty rules match all; a malformed item (a field
 * that is not a number, rail or plane outside 0..32767, a fifth field) matches nothing. */
int zn_net_ib_hca_match(const char *rules, const char *dev, int port);
/* The same, and the rail and plane of the item that matched (NCCL_NET_ID_UNDEF when it gives
 * none, and always for exclusion rules, whose items describe the ports not used). */
int zn_net_ib_hca_lookup(const char *rules, const char *dev, int port, int *rail, int *plane);

/* ---------------------------------------------------------------------------------------
 * The handshake's wire format: one message each way over the listen socket, then a ready
 * byte from the sender. All fields little-endian.
 *
 *   +-------+---------+------+-----+--------------+------------------------------+-------+-----+
 *   | magic | version | nqps | len | listen_magic | body (len bytes): lid, link  | nonce | MAC |
 *   | u32   | u16     | u16  | u32 | u64          | layer, mtu, buffer addr, rkey| 32    | 32  |
 *   |       |         |      |     |              | gid[16], qpn[nqps]           |       |     |
 *   +-------+---------+------+-----+--------------+------------------------------+-------+-----+
 *
 * The sender's MAC is HMAC-SHA256(the key in the listener's handle, "zinc-ib-hello" | every
 * byte before it): the handle travels only through the job's authenticated bootstrap, so a
 * message whose MAC verifies comes from a rank that was given the handle. The nonce (random)
 * makes every message unique, and the listener takes each nonce once, so that a captured
 * message replayed on a new connection is refused. Rejected: a challenge from the listener
 * first. It would make connect() wait for accept() (or accept() for the sender's first isend),
 * and a caller may run both ends in one thread, each to completion. The receiver's answer
 * carries zeros there: the sender connected to the address it was given. The sender's buffer
 * is its FIFO, the receiver's its sizes array (both RDMA-written by the peer). The receiver's
 * qpn list answers the sender's in order. Version 2 added the nonce and the MAC.
 * ------------------------------------------------------------------------------------- */
#define ZN_IB_WIRE_MAGIC   0x4e42495au /* "ZIBN" */
#define ZN_IB_WIRE_VERSION 2
#define ZN_IB_KEY_BYTES    32

struct zn_ib_wire {
    uint64_t listen_magic;
    uint32_t nqps;
    uint16_t lid;
    uint8_t link_layer;
    uint8_t mtu;
    uint64_t addr;
    uint32_t rkey;
    uint8_t gid[16];
    uint32_t qpn[ZN_IB_MAX_QPS];
    uint8_t nonce[32];
    uint8_t mac[32];
};

enum { ZN_IB_WIRE_HDR = 20, ZN_IB_WIRE_BODY = 32 + 4 * ZN_IB_MAX_QPS, ZN_IB_WIRE_AUTH = 64 };
enum { ZN_IB_WIRE_BYTES = ZN_IB_WIRE_HDR + ZN_IB_WIRE_BODY + ZN_IB_WIRE_AUTH };

void zn_net_ib_wire_encode(const struct zn_ib_wire *w, uint8_t out[ZN_IB_WIRE_BYTES]);
/* 0, or -EPROTO with *why naming the first bad field. Never reads past len. */
int zn_net_ib_wire_decode(const uint8_t *buf, size_t len, struct zn_ib_wire *w, const char **why);
/* The MAC of an encoded message (its nonce included) for the listener's key: written into its
 * last 32 bytes, or checked there (1: the sender knows the key). */
void zn_net_ib_wire_sign(uint8_t msg[ZN_IB_WIRE_BYTES], const uint8_t key[ZN_IB_KEY_BYTES]);
int zn_net_ib_wire_verify(const uint8_t msg[ZN_IB_WIRE_BYTES], const uint8_t key[ZN_IB_KEY_BYTES]);

/* ---------------------------------------------------------------------------------------
 * Communicators
 * ------------------------------------------------------------------------------------- */
/* A FIFO slot: the receiver writes e[0..n) first, then idx (a separate RDMA write on the same
 * QP, so the sender never sees an index before the entries it announces). */
struct zn_ib_fifo_entry {
    uint64_t addr;
    uint64_t size;
    uint32_t rkey;
    int32_t tag;
    uint32_t nreqs;
    uint32_t pad;
};

struct zn_ib_fifo_slot {
    struct zn_ib_fifo_entry e[ZN_IB_MAX_RECVS];
    _Atomic uint64_t idx; /* sequence number + 1 of the receive that filled the slot */
    uint64_t pad[7];
};

enum zn_ib_req_type {
    ZN_IB_REQ_FREE = 0,
    ZN_IB_REQ_SEND,
    ZN_IB_REQ_RECV,
    ZN_IB_REQ_FLUSH,
    ZN_IB_REQ_RMA, /* a one-sided write (ib_rma.c) */
};

/* Work request ids: what completed in the high 32 bits, the FIFO slot or request index low. */
enum {
    ZN_IB_WR_RECV = 0,
    ZN_IB_WR_SEND_GROUP = 1,
    ZN_IB_WR_FIFO = 2,
    ZN_IB_WR_FLUSH = 3,
    ZN_IB_WR_DATA = 4,
    ZN_IB_WR_RMA = 5,
};
#define ZN_IB_WRID(kind, low) (((uint64_t)(kind) << 32) | (uint32_t)(low))

struct zn_ib_comm;
struct ib_pending;

struct zn_ib_req {
    enum zn_ib_req_type type;
    struct zn_ib_comm *comm;
    int done;
    int n;
    uint64_t idx;
    uint64_t sizes[ZN_IB_MAX_RECVS];
    void *data; /* send: the buffer, written when the slot's sends are all posted */
    uint32_t lkey;
    int tag;
    ncclResult_t err; /* send: refused when matched (larger than the posted receive) */
    /* buffers posted without a registration, registered for this request only */
    struct zn_ib_mr *tmp_mr[ZN_IB_MAX_RECVS];
};

/* Memory both sides write into remotely, registered as one block. */
struct zn_ib_shared {
    struct zn_ib_fifo_slot fifo[ZN_IB_MAX_REQS];     /* send comm: written by the receiver */
    struct zn_ib_fifo_slot stage[ZN_IB_MAX_REQS];    /* recv comm: source of its FIFO writes */
    uint64_t sizes[ZN_IB_MAX_REQS][ZN_IB_MAX_RECVS]; /* recv: written by the sender; send: source */
    uint64_t flush_dst;
};

struct zn_ib_comm {
    int is_send;
    struct zn_ib_dev *dev;
    struct ibv_cq *cq;
    int nqps;
    struct ibv_qp *qps[ZN_IB_MAX_QPS];
    struct ibv_qp *flush_qp; /* recv: connected to itself, for iflush's RDMA read */
    struct zn_ib_shared *sh;
    struct ibv_mr *sh_mr;
    uint64_t peer_addr; /* send: the peer's sizes array; recv: the peer's FIFO */
    uint32_t peer_rkey;
    char peer[ZN_SOCKADDR_STRLEN];
    int fd; /* the handshake socket, kept open: its hangup means the peer is gone */
    int tc; /* traffic class, -1: ZINC_IB_TC */
    int64_t next_hup_check;
    int64_t hup_since;     /* when the hangup was first seen (0: not yet) */
    struct ib_pending *hs; /* send: the handshake's answer, still to come */
    int peer_ready;        /* recv: the sender's QPs are up */
    uint64_t announced;    /* recv: receives whose FIFO entries are posted (<= seq) */
    /* send: requests posted but not yet matched to a FIFO slot, oldest first */
    struct zn_ib_req *sendq[ZN_IB_SENDQ];
    int sendq_head, sendq_n;
    uint64_t seq; /* send: next FIFO slot to consume; recv: next slot to fill */
    /* send: the requests matched to the current slot's entries */
    struct zn_ib_req *slot_reqs[ZN_IB_MAX_REQS][ZN_IB_MAX_RECVS];
    int nposted;
    /* recv: the request waiting on each slot */
    struct zn_ib_req *recv_reqs[ZN_IB_MAX_REQS];
    struct zn_ib_req reqs[ZN_IB_MAX_REQS * ZN_IB_MAX_RECVS];
    ncclResult_t failed; /* sticky: once a completion failed, every call reports it */
    _Atomic int async_failed;
    struct zn_ib_comm *next_live; /* the device's live comms, for async events */
};

/* Connection setup (ib_conn.c). */
/* tc: the communicator's traffic class (ncclNetCommConfig), or -1 for ZINC_IB_TC. */
ncclResult_t zn_net_ib_listen(int dev, int tc, void *handle, void **listen_comm);
ncclResult_t zn_net_ib_connect(int dev, int tc, void *handle, void **send_comm);
ncclResult_t zn_net_ib_accept(void *listen_comm, void **recv_comm);
ncclResult_t zn_net_ib_close_listen(void *listen_comm);
void zn_net_ib_comm_free(struct zn_ib_comm *c);
/* The sender's side of the handshake after connect() returned: reads the answer and brings
 * the QPs to RTS. Called by isend and test until c->hs is NULL. */
ncclResult_t zn_net_ib_conn_progress(struct zn_ib_comm *c);
/* The receiver's side: 1 once the sender said its QPs are up (and FIFO writes may go), 0 not
 * yet, or a negative errno (-EPIPE: the sender is gone). */
int zn_net_ib_peer_ready(struct zn_ib_comm *c);
/* Parameters the connection uses, chosen once (ib_conn.c). */
int zn_net_ib_qps_per_conn(void);

/* Live comms and the async event thread (ib_data.c). */
void zn_net_ib_comm_live(struct zn_ib_comm *c, int live);

/* The data path's pieces that ib_rma.c shares (ib_data.c). A free request of c, or NULL when
 * all are in flight; ibv_post_send with the error logged; the comm's sticky failure (a failed
 * completion, an async event, the port down); whether the peer's end of the handshake socket
 * has closed (its process exited or it closed the comm), looked at most every 10 ms. */
struct zn_ib_req *zn_net_ib_req_alloc(struct zn_ib_comm *c, enum zn_ib_req_type type);
ncclResult_t zn_net_ib_post(struct zn_ib_comm *c, struct ibv_qp *qp, struct ibv_send_wr *wr);
ncclResult_t zn_net_ib_comm_check(struct zn_ib_comm *c);
int zn_net_ib_hung_up(struct zn_ib_comm *c);

/* The net (ib_data.c): NCCL 2.30's newest table. */
extern const ncclNet_t zn_net_ib;

#endif
