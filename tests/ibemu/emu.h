/*
 * ibemu: a user-space emulation of libibverbs for tests (a test double, not a driver).
 *
 * libzinc-ibemu.so exports the libibverbs.so.1 entry points that zinc's IB net looks up with
 * dlsym, under the same names and symbol versions, and fills ibv_context.ops for the inline
 * data-path calls (ibv_post_send, ibv_post_recv, ibv_poll_cq). Reliable-connected queue pairs
 * of different processes talk through shared memory in /dev/shm:
 *
 *   fabric segment  /zinc-ibemu-<fabric>          directory of ports, "NICs" and QP numbers
 *   QP segment      /zinc-ibemu-<fabric>-qp<qpn>  one per QP: its state for the peer, the ack
 *                                                 words the peer writes, two inbound rings
 *
 * Every opened context runs a "NIC" thread. User memory is private to its process, so data
 * moves in two copies: the requester's NIC thread copies from its registered memory into the
 * peer QP's request ring; the responder's NIC thread checks the rkey, access flags and bounds
 * against its own memory registrations and copies into place (or, for an RDMA read, copies the
 * source into the requester's response ring). Acknowledgements are cumulative message numbers
 * that the responder stores in the requester's segment. Each ring has exactly one producer
 * (the peer QP's NIC thread) and one consumer (the owner's NIC thread), so the rings need no
 * locks. See README.md for what is modelled and what is not.
 */
#ifndef ZINC_IBEMU_EMU_H
#define ZINC_IBEMU_EMU_H

#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define EMU_EXPORT __attribute__((visibility("default")))

enum {
    EMU_MAX_DEVICES = 8,
    EMU_MAX_PORTS = 2,
    EMU_PORT_SLOTS = 256,
    EMU_NIC_SLOTS = 256,
    EMU_QP_SLOTS = 4096, /* qpn = generation << 12 | slot */
    EMU_MAX_SGE = 30,
    EMU_MAX_INLINE = 512,
    EMU_MAX_QP_WR = 32768,
    EMU_MAX_CQE = 4194303,
    EMU_MAX_RD_ATOMIC = 16,
    EMU_EVENTS = 256, /* async events queued per context before the oldest are dropped */
};

/* Device limits that ibv_query_device reports and create calls enforce. */
#define EMU_MAX_MSG_SZ (1u << 31)

/* ---------------------------------------------------------------------------------------
 * Configuration, read once from the environment (emu_device.c).
 * ------------------------------------------------------------------------------------- */
struct emu_devcfg {
    char name[IBV_SYSFS_NAME_MAX];
    int link_layer; /* IBV_LINK_LAYER_INFINIBAND or IBV_LINK_LAYER_ETHERNET */
    int nports;
    int port_down[EMU_MAX_PORTS + 1];
};

struct emu_fault {
    long wc_n; /* the wc_n-th completion (counted from 1) gets wc_status; 0: none */
    int wc_status;
    uint32_t wc_vendor;
    long portdown_n; /* after the n-th completion, every port goes down */
    long qpfatal_n;  /* the QP of the n-th completion takes a fatal error */
};

struct emu_config {
    char fabric[64];
    char host[128];
    int ndev;
    struct emu_devcfg dev[EMU_MAX_DEVICES];
    int speed, width; /* active_speed / active_width codes */
    int dmabuf;
    uint64_t ring_bytes;
    uint64_t retry_cap_ns;
    uint64_t ack_delay_ns; /* acknowledgements reach the requester this late */
    int debug;
    struct emu_fault fault;
};

const struct emu_config *emu_config(void);
void emu_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
uint64_t emu_now_ns(void);

/* ---------------------------------------------------------------------------------------
 * Shared memory (emu_fabric.c).
 * ------------------------------------------------------------------------------------- */
#define EMU_FABRIC_MAGIC 0x7a696e6369626501ull /* last byte: layout version */
#define EMU_SEG_MAGIC    0x7a696e6371707301ull

struct emu_port_slot {
    _Atomic uint64_t key; /* hash of host, device, port; 0: free */
    _Atomic uint32_t down;
    uint32_t pad;
};

struct emu_nic_slot {
    _Atomic int32_t pid; /* owner; 0: free */
    _Atomic uint32_t doorbell;
    _Atomic uint32_t sleeping;
    uint8_t pad[52];
};

struct emu_qp_slot {
    _Atomic int32_t pid;
    _Atomic uint32_t gen;
};

struct emu_fabric {
    _Atomic uint64_t magic;
    _Atomic uint32_t next_key;
    uint32_t pad;
    struct emu_port_slot ports[EMU_PORT_SLOTS];
    struct emu_nic_slot nics[EMU_NIC_SLOTS];
    struct emu_qp_slot qps[EMU_QP_SLOTS];
};

/*
 * One inbound ring. Packets are 64-byte aligned; a packet that does not fit before the end is
 * preceded by a PAD packet that fills the rest.
 *
 *   head: written by the producer (the peer's NIC thread), tail: by the consumer (the owner's)
 */
struct emu_ring {
    _Atomic uint64_t head;
    uint8_t pad0[56];
    _Atomic uint64_t tail;
    uint8_t pad1[56];
    uint64_t size;
    uint64_t offset; /* of the data from the segment's start */
    uint8_t pad2[48];
};

enum emu_pkt_type { PKT_PAD = 1, PKT_WRITE, PKT_READ_REQ, PKT_READ_RESP };
enum emu_pkt_flags { PKT_FIRST = 1, PKT_LAST = 2, PKT_IMM = 4 };

/*
 *   +------+-------+-----+------+-----+-------+-------+-----+-----+------------+
 *   | type | flags | len | rkey | msn | raddr | total | imm | pad | payload... |
 *   +------+-------+-----+------+-----+-------+-------+-----+-----+------------+
 *
 * WRITE: raddr is where this packet's payload goes; total and rkey describe the message.
 * READ_REQ: raddr/rkey/total name the source. READ_RESP: raddr is the offset in the read.
 */
struct emu_pkt {
    uint32_t type;
    uint32_t flags;
    uint32_t len;
    uint32_t rkey;
    uint64_t msn;
    uint64_t raddr;
    uint64_t total;
    uint32_t imm;
    uint32_t pad;
};

enum { EMU_QPS_DESTROYED = 0xff };

struct emu_qp_seg {
    uint64_t magic;
    uint32_t qpn;
    _Atomic int32_t pid;
    uint32_t nic_slot;
    _Atomic uint32_t port_slot;
    _Atomic uint32_t link_layer;
    _Atomic uint32_t lid;
    _Atomic uint32_t state;    /* the owner's enum ibv_qp_state, or EMU_QPS_DESTROYED */
    _Atomic uint32_t dest_qpn; /* the owner's peer, from RTR */
    _Atomic uint32_t gid_type; /* of the owner's source GID (RoCE), from RTR */
    _Atomic uint32_t rnr_retry;
    /* Written by the peer about the owner's requests: cumulative ack, then a negative ack. */
    _Atomic uint64_t acked_msn;
    _Atomic uint64_t nak_msn;
    _Atomic uint32_t nak_status;
    _Atomic uint32_t nak_vendor;
    uint8_t pad[40];
    struct emu_ring req;  /* the peer's requests to the owner */
    struct emu_ring resp; /* the peer's read responses to the owner */
};

struct emu_fabric *emu_fabric(void);
uint32_t emu_port_slot(const char *dev, int port);
void emu_port_gid(uint32_t slot, int link_layer, int index, union ibv_gid *gid, int *type);
int emu_port_gid_count(int link_layer);
int emu_nic_slot_alloc(void);
void emu_nic_slot_free(int slot);
void emu_nic_kick(uint32_t slot);
void emu_nic_sleep(int slot, uint32_t seq, uint64_t ns);
int emu_qp_slot_alloc(uint32_t *qpn);
void emu_qp_slot_free(uint32_t qpn);
void emu_qp_seg_name(uint32_t qpn, char *buf, size_t len);
int emu_pid_dead(int32_t pid);
/* The owner of a mapped peer segment still holds its lock (or is this process). */
int emu_seg_owner_alive(int fd, const struct emu_qp_seg *seg);
void emu_reclaim_dead(void);

static inline uint8_t *emu_ring_data(struct emu_qp_seg *seg, struct emu_ring *r)
{
    return (uint8_t *)seg + r->offset;
}

/* Producer: room for a packet with n payload bytes, or NULL; emu_ring_publish makes it
 * visible. */
struct emu_pkt *emu_ring_reserve(struct emu_qp_seg *seg, struct emu_ring *r, uint32_t n,
                                 uint64_t *new_head);
void emu_ring_publish(struct emu_ring *r, uint64_t new_head);
/* Consumer: the next packet (PAD skipped), or NULL; emu_ring_pop releases it. */
struct emu_pkt *emu_ring_peek(struct emu_qp_seg *seg, struct emu_ring *r);
void emu_ring_pop(struct emu_ring *r, const struct emu_pkt *p);
void emu_ring_discard(struct emu_ring *r);

/* ---------------------------------------------------------------------------------------
 * Process-local objects.
 * ------------------------------------------------------------------------------------- */
struct emu_device {
    struct ibv_device dev; /* first: the pointer handed out is &dev */
    int index;
    const struct emu_devcfg *cfg;
    uint64_t guid;
};

struct emu_mr {
    struct ibv_mr mr;
    struct emu_mr *next; /* hash chain in the context */
    uint64_t iova;
    uint8_t *host;
    uint64_t len;
    int access;
    void *map; /* dmabuf mapping */
    size_t map_len;
    void *gpu; /* GPU memory: the CUDA context it belongs to (emu_gpu.c); NULL: host memory */
};

struct emu_ctx {
    struct ibv_context ctx;
    struct emu_device *dev;
    pthread_mutex_t lock; /* QP list and MR table; held by the NIC thread for a pass */
    struct emu_qp *qps;
    struct emu_mr *mrs[256];
    int nic_slot;
    uint32_t port_slot[EMU_MAX_PORTS + 1];
    pthread_t nic;
    atomic_int stop;
    pthread_mutex_t ev_lock;
    struct ibv_async_event ev[EMU_EVENTS];
    int ev_head, ev_count;
    int ev_pipe[2];
    atomic_int ports_down;     /* fault injection: take the ports down after this NIC pass */
    struct emu_ctx *next_open; /* list of open contexts, for port events */
};

struct emu_pd {
    struct ibv_pd pd;
    atomic_int refs;
};

struct emu_cq {
    struct ibv_cq cq;
    pthread_mutex_t lock;
    struct ibv_wc *wc;
    int cap, head, count;
    int overflowed;
    atomic_int refs;
};

struct emu_swqe {
    uint64_t wr_id;
    enum ibv_wr_opcode opcode;
    int signaled;
    int num_sge;
    struct ibv_sge sge[EMU_MAX_SGE];
    uint8_t *host[EMU_MAX_SGE]; /* translated by the first transmission */
    void *gpu[EMU_MAX_SGE];     /* and their registrations' GPU contexts (NULL: host memory) */
    uint64_t raddr;
    uint32_t rkey;
    uint32_t imm;
    uint64_t len;
    uint64_t msn;
    uint64_t tx_off;
    int started;
    int read_done;
    int loc_err; /* a local protection error found when transmitting */
    uint8_t *inl;
};

struct emu_rwqe {
    uint64_t wr_id;
};

struct emu_qp {
    struct ibv_qp qp;
    struct emu_ctx *ctx;
    struct emu_qp *next;
    pthread_mutex_t lock; /* queues, state, attributes */
    struct ibv_qp_attr attr;
    struct ibv_qp_cap cap;
    int sq_sig_all;
    struct emu_swqe *sq;
    uint32_t sq_cap;
    uint64_t sq_post, sq_tx, sq_done;
    struct emu_rwqe *rq;
    uint32_t rq_cap;
    uint64_t rq_post, rq_done;
    uint64_t next_msn;
    int fd;
    struct emu_qp_seg *seg;
    size_t seg_len;
    int peer_fd;
    struct emu_qp_seg *peer;
    size_t peer_len;
    /* responder: the message at the head of the request ring */
    struct emu_mr *rx_mr;
    uint64_t rx_rnr_since;
    uint64_t rx_read_off;
    /* requester: progress and reachability */
    uint64_t last_check_ns;
    uint64_t unreach_since;
    int reachable;
    /* ZINC_IBEMU_ACK_DELAY_MS: the newest acknowledgement, when it came, and the one in effect */
    uint64_t ack_seen, ack_seen_ns, ack_eff;
    int flushing;
    int fault; /* injected: 1 error completion (QP to error), 2 QP fatal (and async event) */
};

/* emu_device.c */
struct emu_mr *emu_mr_find(struct emu_ctx *c, uint32_t key);
void emu_async_event(struct emu_ctx *c, enum ibv_event_type type, void *element, int port);
void emu_ports_down(void);

/* emu_gpu.c: GPU memory (the test double's GPUDirect RDMA). */
void *emu_gpu_context(const void *p); /* p's CUDA context if it is GPU memory, else NULL */
int emu_copy(void *dst, const void *src, size_t n, void *gpu_ctx); /* memcpy, or through CUDA */

/* emu_qp.c */
void emu_cq_push(struct emu_qp *qp, struct emu_cq *cq, struct ibv_wc *wc);
void emu_qp_to_error(struct emu_qp *qp);
int emu_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
int emu_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
int emu_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc);
/* The WC of a finished send WR, through the fault-injection counter. */
void emu_complete_send(struct emu_qp *qp, struct emu_swqe *e, int status, uint32_t vendor);
void emu_complete_recv(struct emu_qp *qp, uint64_t len, uint32_t imm);

/* emu_nic.c */
void *emu_nic_main(void *arg);
int emu_qp_progress(struct emu_qp *qp, uint64_t now, int *pending);
uint64_t emu_retry_timeout_ns(const struct ibv_qp_attr *a);
uint64_t emu_rnr_timeout_ns(unsigned timer, unsigned retry);

#endif
