/*
 * The boundary between the host code and the CUDA kernels: plain C structs and layout
 * arithmetic, shared by C and CUDA C++ (one header for the boundary, static size asserts).
 *
 * GPU arena. Every rank of a cuda communicator whose GPUs can all reach each other owns one
 * arena in its device memory, mapped into every peer (p2p transport). Between each ordered
 * pair of ranks (src -> dst) and each channel (one thread block of a kernel) there is a FIFO of
 * nbuf slots that lives in dst's arena; src pushes into it, dst consumes from it (nbuf:
 * ZN_DEV_NBUF, or ZN_DEV_NET_NBUF for a communicator across hosts, zn_dev_comm). Rows are
 * indexed by the peer's slot in d's view (zn_dev_comm: its rank, except on a ring of more than
 * ZN_DEV_MAX_RANKS ranks):
 *
 *   arena of rank d:
 *   +--------------------------------------------------------------+ 0
 *   | ready[src][ch]  u64  written by src: slots it has filled      |
 *   | ack[dst][ch]    u64  written by dst: slots of ours it drained |
 *   | sent[dst][ch]   u64  own: slots pushed to dst (next position) |
 *   | recvd[src][ch]  u64  own: slots consumed from src             |
 *   +--------------------------------------------------------------+ ZN_DEV_DATA_OFF
 *   | slot[src][ch][buf]  slot_bytes each                           |
 *   +--------------------------------------------------------------+
 *
 * Positions are counters kept in device memory, read by each kernel at its start and written
 * back at its end, so a graph replay continues where the last launch stopped: nothing in a
 * captured kernel's arguments goes stale. Every rank launches the same kernels with the same
 * channel counts, so the counters of a pair agree.
 */
#ifndef ZN_ABI_DEV_ABI_H
#define ZN_ABI_DEV_ABI_H

#include "abi/coll_list.h"

#include <stddef.h>
#include <stdint.h>

#define ZN_DEV_MAX_RANKS   8   /* peer slots of a kernel: GPUs of one host on the p2p path */
#define ZN_DEV_MAX_RING    64  /* ranks of a ring across hosts on the kernel path (zn_dev_comm) */
#define ZN_DEV_MAX_CH      128 /* channels: thread blocks of a kernel */
#define ZN_DEV_NBUF        2   /* slots per FIFO of a communicator on one host */
#define ZN_DEV_NET_NBUF    8   /* slots per FIFO of one across hosts (NCCL's NCCL_STEPS) */
#define ZN_DEV_THREADS     512
#define ZN_DEV_MAX_P2P     512 /* send/recv operations fused into one launch */
#define ZN_DEV_ABI_VERSION 13

#define ZN_DEV_CTRL_WORDS  (8 * ZN_DEV_MAX_RANKS * ZN_DEV_MAX_CH)
#define ZN_DEV_READY_OFF   0
#define ZN_DEV_ACK_OFF     (ZN_DEV_READY_OFF + 8 * ZN_DEV_MAX_RANKS * ZN_DEV_MAX_CH)
#define ZN_DEV_SENT_OFF    (ZN_DEV_ACK_OFF + 8 * ZN_DEV_MAX_RANKS * ZN_DEV_MAX_CH)
#define ZN_DEV_RECVD_OFF   (ZN_DEV_SENT_OFF + 8 * ZN_DEV_MAX_RANKS * ZN_DEV_MAX_CH)
#define ZN_DEV_LLEPOCH_OFF (ZN_DEV_RECVD_OFF + 8 * ZN_DEV_MAX_RANKS * ZN_DEV_MAX_CH)
/* Row 0 of the LLEPOCH array: [ch] this rank's LL call count. Row 1: [ch] the last ring-LL call
 * the next rank on the ring finished reading (written by next). Rows 2-7, two rows each, at
 * word peer slot * ZN_DEV_P2P_LL_CH + channel, the LL messages of the send/recv kernel
 * (zn_dev_p2p_op.ll): rows 2-3 how many this rank sent to the peer, rows 4-5 how many it took
 * from the peer, rows 6-7 how many of this rank's the peer took (written by the peer). */
#define ZN_DEV_RING_ACK_OFF    (ZN_DEV_LLEPOCH_OFF + 8 * ZN_DEV_MAX_CH)
#define ZN_DEV_P2PLL_SENT_OFF  (ZN_DEV_LLEPOCH_OFF + 2 * 8 * ZN_DEV_MAX_CH)
#define ZN_DEV_P2PLL_RECVD_OFF (ZN_DEV_LLEPOCH_OFF + 4 * 8 * ZN_DEV_MAX_CH)
#define ZN_DEV_P2PLL_ACK_OFF   (ZN_DEV_LLEPOCH_OFF + 6 * 8 * ZN_DEV_MAX_CH)
/* Zero-copy calls on registered buffers (ZN_DEV_ZEROCOPY): per (src, ch), written by src, its
 * phase (2k-1 when it entered call k, 2k when it finished writing) and where this rank sees
 * src's send and receive buffers; [own rank][ch] holds this rank's own call count. */
#define ZN_DEV_ZCSEQ_OFF  (ZN_DEV_LLEPOCH_OFF + 8 * ZN_DEV_MAX_RANKS * ZN_DEV_MAX_CH)
#define ZN_DEV_ZCSEND_OFF (ZN_DEV_ZCSEQ_OFF + 8 * ZN_DEV_MAX_RANKS * ZN_DEV_MAX_CH)
#define ZN_DEV_ZCRECV_OFF (ZN_DEV_ZCSEND_OFF + 8 * ZN_DEV_MAX_RANKS * ZN_DEV_MAX_CH)
#define ZN_DEV_DATA_OFF   65536 /* control area, padded */
/* Net shadows. A peer r on another host has no arena this GPU can map: arena[r] points at a
 * shadow instead, a block of pinned host memory with an arena's control words that the kernels
 * write as if it were the peer's arena (ready[rank][ch], ack[rank][ch]) and that the proxy's
 * GPU net engine (proxy/gpu_net_engine.h) reads and carries over the net. What comes from r, the
 * engine stores in the same shadow: ready[r][ch] (written into the own arena for a peer on this
 * host), and ack[r][ch], the count of our slots it took (kernels find both through fifo.cuh's
 * inbox()). The slots are not an arena's: ZN_DEV_NET_NBUF per FIFO, for the net's latency and
 * for peers whose kernels do not run at the same time, in a row per direction
 * (zn_dev_net_row_off): the slots this rank sends to r (zn_dev_comm.net_tx) and those r sends
 * (net_rx; one shadow serves both when r is both ring neighbours). A row is in the shadow after
 * the control words, or, with GPUDirect RDMA, in device memory that the net reads or writes
 * directly. Nobody keeps counters in a shadow, so its sent rows hold what the engine needs
 * besides: the bytes of the slot last committed into buffer buf of channel ch, at ctrl word
 * (buf, ch) of this offset. */
#define ZN_DEV_NETSIZE_OFF ZN_DEV_SENT_OFF
/* And its recvd rows, at word (the peer's slot, ch): 0 while the peer's connection of channel ch
 * is open, k + 1 once it closed after k slots arrived (it exited, aborted or destroyed its
 * communicator). A kernel that waits for slot k or later from it gives up (ZN_DEV_PEER_GONE);
 * kernels that do not wait for it are not disturbed. */
#define ZN_DEV_NETGONE_OFF ZN_DEV_RECVD_OFF
/* Low-latency (LL) buffers: 16-byte packets of 8 data bytes, each 4 data bytes next to a 4-byte
 * flag, so that a reader needs no separate ready flag and no fence: per (src, ch), two
 * buffers (calls alternate) of ZN_DEV_LL_BYTES. Used for small calls of every collective. */
#define ZN_DEV_LL_BYTES 16384
/* The send/recv kernel's LL messages (small sends and receives between GPUs of one host): per
 * source slot and channel (the first ZN_DEV_P2P_LL_CH), two buffers (messages alternate) of
 * ZN_DEV_P2P_LL_BYTES after the collectives' LL buffers; a message's slice on a channel is up to
 * half that many bytes. A sender reuses a buffer once the receiver has taken the message
 * before (rows 6-7 of LLEPOCH); the flag is the message's number on that channel plus one. */
#define ZN_DEV_P2P_LL_BYTES 32768
#define ZN_DEV_P2P_LL_CH    32

/* Usable from host C and from CUDA device code. */
#ifdef __CUDACC__
#define ZN_DEV_HD __host__ __device__
#else
#define ZN_DEV_HD
#endif

#ifdef __cplusplus
static_assert(8 * ZN_DEV_CTRL_WORDS <= ZN_DEV_DATA_OFF, "control area fits its page");
#else
_Static_assert(8 * ZN_DEV_CTRL_WORDS <= ZN_DEV_DATA_OFF, "control area fits its page");
#endif
#ifdef __cplusplus
static_assert(ZN_DEV_MAX_RANKS * ZN_DEV_P2P_LL_CH <= 2 * ZN_DEV_MAX_CH,
              "LL message counts fit two rows");
#else
_Static_assert(ZN_DEV_MAX_RANKS *ZN_DEV_P2P_LL_CH <= 2 * ZN_DEV_MAX_CH,
               "LL message counts fit two rows");
#endif
#ifdef __cplusplus
static_assert(ZN_DEV_NET_NBUF <= ZN_DEV_MAX_RANKS, "a net slot's size word per buffer fits");
#else
_Static_assert(ZN_DEV_NET_NBUF <= ZN_DEV_MAX_RANKS, "a net slot's size word per buffer fits");
#endif

/* Arena layout for a communicator whose kernels have nslots peer slots (zn_dev_comm), nch channels
 * (the communicator's most; the control words always have room for ZN_DEV_MAX_CH), nbuf slots per
 * FIFO and this slot size: control words, then the FIFO slots (src, ch, buf), then the LL buffers
 * (src, ch, 2). */
ZN_DEV_HD static inline size_t zn_dev_ll_off(int nslots, int nch, int nbuf, size_t slot_bytes)
{
    return ZN_DEV_DATA_OFF + (size_t)nslots * (size_t)nch * (size_t)nbuf * slot_bytes;
}

ZN_DEV_HD static inline size_t zn_dev_arena_bytes(int nslots, int nch, int nbuf, size_t slot_bytes)
{
    return zn_dev_ll_off(nslots, nch, nbuf, slot_bytes) +
           (size_t)nslots * (size_t)nch * 2 * ZN_DEV_LL_BYTES +
           (size_t)nslots * ZN_DEV_P2P_LL_CH * 2 * ZN_DEV_P2P_LL_BYTES;
}

/* Offset of control word (peer, ch) of the array at off (ZN_DEV_READY_OFF, ...). */
ZN_DEV_HD static inline size_t zn_dev_ctrl_off(size_t off, int peer, int ch)
{
    return off + ((size_t)peer * ZN_DEV_MAX_CH + (size_t)ch) * 8;
}

/* Offset of slot (src, ch, buf) in an arena of nbuf slots per FIFO. */
ZN_DEV_HD static inline size_t zn_dev_slot_off(int src, int ch, int nch, int nbuf, int buf,
                                               size_t slot_bytes)
{
    return ZN_DEV_DATA_OFF +
           (((size_t)src * (size_t)nch + (size_t)ch) * (size_t)nbuf + (size_t)buf) * slot_bytes;
}

/* A row of net slots (what this rank sends to a peer on another host, or what it receives from
 * it): ZN_DEV_NET_NBUF slots per channel, channel by channel. Offset of slot (ch, buf) in it. */
ZN_DEV_HD static inline size_t zn_dev_net_row_off(int ch, int buf, size_t slot_bytes)
{
    return ((size_t)ch * ZN_DEV_NET_NBUF + (size_t)buf) * slot_bytes;
}

/* Bytes of a row of nch channels. */
ZN_DEV_HD static inline size_t zn_dev_net_row_bytes(int nch, size_t slot_bytes)
{
    return zn_dev_net_row_off(nch, 0, slot_bytes);
}

/* Where a row lives in a net shadow that holds rows (pinned host memory): row 0 what this rank
 * sends, row 1 what it receives, after the control words. A row the net moves to or from GPU
 * memory directly (GPUDirect RDMA, proxy/gpu_net_engine.h) is not in the shadow but in device
 * memory. */
ZN_DEV_HD static inline size_t zn_dev_net_slot_off(int row, int ch, int nch, int buf,
                                                   size_t slot_bytes)
{
    return ZN_DEV_DATA_OFF + (size_t)row * zn_dev_net_row_bytes(nch, slot_bytes) +
           zn_dev_net_row_off(ch, buf, slot_bytes);
}

/* Size of a net shadow with `rows` rows in it (0, 1 or 2). */
ZN_DEV_HD static inline size_t zn_dev_net_shadow_bytes(int nch, size_t slot_bytes, int rows)
{
    return zn_dev_net_slot_off(rows, 0, nch, 0, slot_bytes);
}

/* Offset of LL buffer (src, ch, buf) in an arena. */
ZN_DEV_HD static inline size_t zn_dev_ll_buf(size_t ll_off, int src, int ch, int nch, int buf)
{
    return ll_off + (((size_t)src * (size_t)nch + (size_t)ch) * 2 + (size_t)buf) * ZN_DEV_LL_BYTES;
}

/* Offset of the send/recv kernel's LL buffer (src, ch, buf) in an arena of nslots slots and
 * nch channels. */
ZN_DEV_HD static inline size_t zn_dev_p2p_ll_buf(size_t ll_off, int nslots, int nch, int src,
                                                 int ch, int buf)
{
    return ll_off + (size_t)nslots * (size_t)nch * 2 * ZN_DEV_LL_BYTES +
           (((size_t)src * ZN_DEV_P2P_LL_CH + (size_t)ch) * 2 + (size_t)buf) * ZN_DEV_P2P_LL_BYTES;
}

/* ZN_DEV_ALGO_RING: allreduce, allgather, reducescatter (ring steps), broadcast, reduce (chains
 * along the ring); a rank talks only to its ring neighbours, so it works where only those are
 * mapped. The others (one-shot, two-shot, LL, and every direct pattern) need every peer. */
enum zn_dev_algo {
    ZN_DEV_ONESHOT = 0,
    ZN_DEV_TWOSHOT = 1,
    ZN_DEV_ONESHOT_LL = 2, /* LL packets straight to every peer (any collective but on a ring) */
    ZN_DEV_ALGO_RING = 3,
    ZN_DEV_ZEROCOPY = 4, /* registered buffers: peers' buffers read and written in
                            place (zc_send / zc_recv), no FIFO */
    ZN_DEV_RING_LL = 5,  /* small allreduce on a ring: LL packets forwarded along it */
    ZN_DEV_SPLIT = 6     /* reducescatter on one host, two blocks per channel: one pushes the
                            windows to the peers, one reduces what arrives (zn_dev_coll_blocks) */
};

/* What every kernel of a communicator needs to find its peers and report trouble.
 *
 * Kernels address peers by slot: arena[k], the control rows and FIFO slots of a peer, the
 * bits of net_mask. Up to ZN_DEV_MAX_RANKS ranks a peer's slot is its rank. A ring across
 * hosts of more ranks (ring mode: a rank talks to its ring neighbours only) has three slots,
 * 0 this rank, 1 the next rank on the ring and 2 the previous one, and the rank a kernel
 * writes about itself into a neighbour's arena is the slot that neighbour gives it (row_at:
 * this rank is its next's slot 2 and its prev's slot 1). rank, nranks and ring[] stay the
 * communicator's: they place the data. */
struct zn_dev_comm {
    uint8_t *arena[ZN_DEV_MAX_RANKS]; /* each slot's arena as mapped on this device (own and
                                         ring neighbours always; others NULL in ring mode) */
    volatile uint32_t *abort_flag;    /* host-mapped: set by ncclCommAbort */
    uint32_t *error;                  /* host-mapped: a kernel that gives up writes its reason */
    uint64_t slot_bytes;
    uint64_t ll_off;     /* offset of the LL buffers in every arena */
    uint64_t timeout_ns; /* a wait without progress longer than this fails */
    int32_t rank, nranks;
    int32_t nch;       /* channels the arena has room for (no kernel launches more) */
    int32_t ring_pos;  /* this rank's position on the ring */
    int32_t nbuf;      /* slots per FIFO in the arenas (a net shadow: ZN_DEV_NET_NBUF); a
                          ring step moves nbuf / 2 of them (coll_ring.cuh) */
    int32_t self;      /* this rank's slot */
    int32_t nslots;    /* slots in use: nranks, or 3 for a ring of more than ZN_DEV_MAX_RANKS */
    int8_t next, prev; /* slots of the ring neighbours */
    int8_t row_at[ZN_DEV_MAX_RANKS]; /* the slot that the peer in slot k gives this rank */
    int8_t ring[ZN_DEV_MAX_RING];    /* rank at each ring position (neighbours reach each other) */
    uint8_t net_mask;                /* bit k: arena[k] is a net shadow (ZN_DEV_NETSIZE_OFF) */
    /* For a net shadow's slot k: the rows of slots (zn_dev_net_row_off) this rank sends to that
     * peer and receives from it, in the shadow or in device memory (GPUDirect RDMA). */
    uint8_t *net_tx[ZN_DEV_MAX_RANKS];
    uint8_t *net_rx[ZN_DEV_MAX_RANKS];
};

/* Slot pos of the FIFO to (rx 0) or from (rx 1) the peer on another host in slot k. */
ZN_DEV_HD static inline uint8_t *zn_dev_net_slot(const struct zn_dev_comm *c, int k, int rx, int ch,
                                                 uint64_t pos)
{
    return (rx ? c->net_rx[k] : c->net_tx[k]) +
           zn_dev_net_row_off(ch, (int)(pos % ZN_DEV_NET_NBUF), c->slot_bytes);
}

/* Kernel error codes written to *error (first one wins). */
enum zn_dev_error {
    ZN_DEV_OK = 0,
    ZN_DEV_TIMEOUT = 1,
    ZN_DEV_ABORTED = 2,
    ZN_DEV_PEER_GONE = 3 /* waited for a peer on another host whose connection closed */
};

/* One collective call. */
struct zn_dev_coll_args {
    struct zn_dev_comm comm;
    const void *sendbuf;
    void *recvbuf;
    uint64_t count;         /* NCCL's count (per-block count for blocked collectives) */
    uint64_t scalar;        /* premul: one element of dtype */
    const void *scalar_dev; /* premul with ncclScalarDevice: read from here instead */
    int32_t coll;           /* enum zn_coll (abi/coll_list.h): a collective, never a
                               point-to-point row */
    int32_t algo;           /* enum zn_dev_algo (allreduce) */
    int32_t dtype;          /* ncclDataType_t; byte-moving collectives are launched as uint8 */
    int32_t op;             /* enum zn_red */
    int32_t root;
    int32_t nch;
    int32_t premul;
    int32_t post_div;
    /* ZN_DEV_ZEROCOPY: this rank's send and receive buffers as peer r maps them */
    uint64_t zc_send[ZN_DEV_MAX_RANKS];
    uint64_t zc_recv[ZN_DEV_MAX_RANKS];
};

/* A fused group of sends and receives of one communicator. Operations with the same peer
 * and direction are matched in order on both sides. */
struct zn_dev_p2p_op {
    void *buf;
    uint64_t bytes;
    int32_t peer;
    int8_t is_send;
    int8_t ll;   /* LL messages instead of the FIFO: nch <= ZN_DEV_P2P_LL_CH slices of at most
                    ZN_DEV_P2P_LL_BYTES / 2 */
    int16_t nch; /* channels this operation is cut into (both ends compute it from bytes) */
};

struct zn_dev_p2p_args {
    struct zn_dev_comm comm;
    int32_t nops;
    int32_t nch; /* thread blocks: the most channels of any operation */
    struct zn_dev_p2p_op ops[ZN_DEV_MAX_P2P];
};

/* Staged path (GPUs that cannot reach each other, or ZINC_P2P_DISABLE=1): the stream copies
 * the input to pinned host memory, a one-thread kernel rings this doorbell (which operation,
 * in order), the communicator's proxy thread runs the operation on host memory and bumps
 * done, and a one-thread kernel holds the stream until then. The GPU-side signal count lives
 * in device memory, so captured graphs replay correctly. */
#define ZN_DEV_RING 4096
struct zn_dev_doorbell {
    volatile uint64_t go;                /* signals so far (GPU writes) */
    volatile uint64_t done;              /* operations finished (proxy writes) */
    volatile uint64_t ring[ZN_DEV_RING]; /* the descriptor of signal k at k % ZN_DEV_RING */
};

/* One-sided operations (ncclPutSignal / ncclSignal / ncclWaitSignal, api/rma*.c; kernels in
 * device/rma.cu). Signals are counters: a sender adds 1 to the receiver's word for (sender,
 * sigIdx, ctx); a wait consumes by raising a count the receiver keeps in its own device memory
 * (word - consumed >= count, then consumed += count). Both live in device memory or mapped
 * host memory and are read when the kernel runs, so graph replays stay consistent. */
#define ZN_DEV_RMA_MAX_OPS  32 /* puts and signals of one launch */
#define ZN_DEV_RMA_MAX_WAIT 64 /* counts of one wait launch */

/* Between GPUs that map each other: bytes from src to dst (the peer's window as mapped here;
 * none when bytes is 0), then, if sig is set, 1 added to the peer's signal word there. */
struct zn_dev_rma_put {
    const void *src;
    void *dst;
    uint64_t bytes;
    uint64_t *sig;
};

struct zn_dev_rma_put_args {
    int32_t nops, pad;
    struct zn_dev_rma_put ops[ZN_DEV_RMA_MAX_OPS];
};

/* Until *word - *consumed >= count (word: device memory, or mapped host memory raised by the
 * GIN engine), then *consumed += count. */
struct zn_dev_rma_wait {
    const volatile uint64_t *word;
    uint64_t *consumed;
    uint64_t count;
};

/* What a wait watches besides its words: the communicator's abort flag, the GIN engine's error
 * word (NULL without one), the deadline; it gives up by writing its reason into error. */
struct zn_dev_rma_watch {
    volatile uint32_t *abort_flag;
    uint32_t *error;
    volatile uint32_t *gin_error;
    uint64_t timeout_ns;
};

struct zn_dev_rma_wait_args {
    struct zn_dev_rma_watch watch;
    int32_t n, pad;
    struct zn_dev_rma_wait w[ZN_DEV_RMA_MAX_WAIT];
};

/* A GIN request as kernels write it into the engine's FIFO: nccl_device/gin_proxy.h's struct
 * zincGinRequest, field for field (the host side asserts that they match). */
struct zn_dev_gin_req {
    uint64_t seq;
    uint32_t op;
    int32_t peer;
    uint64_t src;
    uint64_t dst_off;
    uint64_t bytes;
    uint32_t win;
    uint32_t flags;
    uint32_t signal, counter;
    uint64_t signal_value;
};

/* The GIN engine's FIFO as kernels reach it: the ticket counter (device memory), the record's
 * tail and error word and the slots (mapped host memory). */
struct zn_dev_gin {
    uint64_t *head;
    volatile uint64_t *tail;
    volatile uint32_t *error;
    struct zn_dev_gin_req *slots;
    uint64_t nslots;
};

/* Requests for peers on other hosts: queued in order, then the kernel waits until the engine
 * has read every source (the operations' buffers are reusable when the kernel ends). */
struct zn_dev_rma_gin_args {
    struct zn_dev_gin gin;
    struct zn_dev_rma_watch watch;
    int32_t nreqs, pad;
    struct zn_dev_gin_req reqs[ZN_DEV_RMA_MAX_OPS];
};

/* Kernel parameters may take up to 32764 bytes since CUDA 12.1 (Volta and later). */
#ifdef __cplusplus
static_assert(sizeof(struct zn_dev_p2p_args) < 32000, "fits the kernel parameter space");
extern "C" {
#else
_Static_assert(sizeof(struct zn_dev_p2p_args) < 32000, "fits the kernel parameter space");
#endif

/* Launch on stream (cudaStream_t passed as void *). Return 0 or a CUDA error code. */
int zn_dev_launch_coll(const struct zn_dev_coll_args *a, void *stream);
/* Thread blocks of a collective's kernel: one per channel, two for ZN_DEV_SPLIT (block 2c
 * pushes channel c's windows, block 2c + 1 reduces them: reducescatter_split in
 * device/coll.cu). */
static inline int zn_dev_coll_blocks(const struct zn_dev_coll_args *a)
{
    return a->algo == ZN_DEV_SPLIT ? 2 * a->nch : a->nch;
}
int zn_dev_launch_p2p(const struct zn_dev_p2p_args *a, void *stream);
/* Staged path: ring the doorbell with descriptor id, then wait for the proxy. bell is the
 * device view of the pinned doorbell, seq a device-memory counter of the communicator. */
int zn_dev_launch_signal(struct zn_dev_doorbell *bell, uint64_t *seq, uint64_t id, void *stream);
int zn_dev_launch_wait(struct zn_dev_doorbell *bell, const uint64_t *seq,
                       const struct zn_dev_comm *comm, void *stream);
/* One-sided operations: puts and signals in order (one block), a wait, GIN requests. */
int zn_dev_launch_rma_put(const struct zn_dev_rma_put_args *a, void *stream);
int zn_dev_launch_rma_wait(const struct zn_dev_rma_wait_args *a, void *stream);
int zn_dev_launch_rma_gin(const struct zn_dev_rma_gin_args *a, void *stream);
/* The last launch error's text. */
const char *zn_dev_error_string(int err);

#ifdef __cplusplus
}
#endif

#endif
