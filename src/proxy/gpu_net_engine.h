/*
 * The proxy's GPU net engine: the FIFOs between GPUs of different hosts for the kernels of a
 * cuda communicator, carried over a net of src/net by the proxy's progress thread (progress.h).
 * Which peers: every rank on another host where the kernels reach every peer (send/recv,
 * alltoall, gather, scatter as kernels), else the ring neighbours on another host.
 *
 * Such a peer gets a net shadow as its arena[] (abi/dev_abi.h): pinned, device-mapped host
 * memory that the kernel writes as if it were the peer's arena, and where it finds what comes
 * from that peer (fifo.cuh, inbox()). Per peer and channel there is one net connection in each
 * direction used, and the engine moves slots in FIFO order; its progress makes no CUDA call, so
 * a slot costs no copy-engine work and no GPU time besides the kernel's own loads and stores
 * (NCCL's net transport works the same way).
 *
 * The slots themselves (a row per direction, zn_dev_comm.net_tx / net_rx) are in the shadow, or,
 * with GPUDirect RDMA, in device memory that the net reads (sends) and writes (receives)
 * directly: where the net reports NCCL_PTR_CUDA and its device is no farther from the GPU than
 * ZINC_NET_GDR_LEVEL (PCI distance; topo/nic.h); sends only with ZINC_NET_GDR_READ. A received
 * slot in device memory is flushed (the net's iflush) before the kernel is told it is there.
 * The net's device is the one nearest the GPU (ties spread over a host's ranks).
 *
 * Each FIFO through a shadow has ZN_DEV_NET_NBUF slots (NCCL's NCCL_STEPS), as have the arenas
 * of a communicator across hosts, and the ring and direct kernels move 4 of them per step
 * (coll_common.cuh's piece_slots; the send/recv kernel fills as many as there is room for): the
 * net's round trip, and peers whose kernels take turns on a GPU, need more in flight per
 * channel than one slot.
 *
 *   sending to p: kernel fills slot k of the row to p, raises ready[me][ch] in shadow(p) ->
 *     engine isends the slot (its byte count from ZN_DEV_NETSIZE_OFF) -> when the send
 *     completes, stores the count of sent slots into ack[p][ch] of shadow(p), where the
 *     kernel's reserve() waits for it.
 *   receiving from p: engine irecvs into slot k of the row from p once the kernel drained it
 *     (ack[me][ch] in shadow(p), written by release()) -> when the receive completes (and, in
 *     device memory, its flush), stores the new count into ready[p][ch] of shadow(p) (a
 *     release store after the bytes); the kernel's consume() waits for it, fences system-wide
 *     and reads the slot.
 *
 * Counters never reset, so graph replays and later launches continue where the last one
 * stopped, as on the NVLink path. The engine never blocks: a failed net call records the
 * failure, raises the communicator's device abort word (its kernels end with an error) and
 * stops the engine; zn_gpunet_failure reports it.
 */
#ifndef ZN_PROXY_GPU_NET_ENGINE_H
#define ZN_PROXY_GPU_NET_ENGINE_H

#include "transport/transport.h"
#include "util/err.h"

#include <stddef.h>
#include <stdint.h>

#define ZN_GPUNET_MAX_CH    16
#define ZN_GPUNET_MAX_RANKS 64 /* the bits of send_to and recv_from */

struct zn_gpunet;

struct zn_gpunet_config {
    const struct zn_tctx *ctx; /* rank, peers, bootstrap (collective setup) */
    uint64_t send_to;          /* bit r: this rank's kernels send to r through the net */
    uint64_t recv_from;        /* bit r: they receive from r through it */
    /* The control rows of a shadow (abi/dev_abi.h, zn_dev_comm): slot[r] is the slot this
     * rank's kernels give peer r (the row of what comes from r), row_in[r] the slot r's
     * kernels give this rank (the row of what goes to r). NULL: the ranks themselves. */
    const int8_t *slot;
    const int8_t *row_in;
    int nch; /* channels of the arena layout (every rank the same) */
    size_t slot_bytes;
    volatile uint32_t *abort_word; /* host view of the kernels' abort word */
    int cuda_dev; /* the kernels' GPU (its PCI place picks the net device and GPUDirect RDMA);
                     -1: none */
    /* Where the shadows live. NULL: pinned host memory mapped into the device (cudaHostAlloc),
     * what the kernels need. A test that stands in for the kernels with host code passes
     * plain memory (host == dev) and runs the engine without a GPU. */
    ncclResult_t (*shadow_alloc)(void **host, void **dev, size_t size);
    void (*shadow_free)(void *host);
    /* Where rows moved by GPUDirect RDMA live. NULL: device memory of cuda_dev (cudaMalloc,
     * registered as a dmabuf where the net takes one). A test passes host memory, which the
     * engine then registers as NCCL_PTR_CUDA memory. */
    ncclResult_t (*gdr_alloc)(void **ptr, size_t size);
    void (*gdr_free)(void *ptr);
};

/* Where the kernels find a peer's FIFOs (device views, NULL for a direction not used): its
 * shadow (control words: zn_dev_comm.arena) and the rows of slots this rank sends to it and
 * receives from it (zn_dev_comm.net_tx / net_rx). */
struct zn_gpunet_view {
    uint8_t *ctrl;
    uint8_t *tx, *rx;
};

/* What an engine chose, for logs and tests. */
struct zn_gpunet_info {
    char net[32];      /* the net */
    int dev;           /* its device the connections use */
    char dev_name[64]; /* that device's name */
    int ptr_support;   /* the memory it moves (NCCL_PTR_*) */
    int gdr_tx;        /* the slots sent are read from device memory (GPUDirect RDMA) */
    int gdr_rx;        /* the slots received are written into device memory */
    uint64_t flushes;  /* flushes of received slots the net asked the engine to wait for */
};

/* At most ZN_GPUNET_MAX_RANKS ranks. Collective over every rank of the communicator (ranks with no
 * peer in send_to | recv_from take part in the exchange and start nothing; r in send_to of rank q
 * must have q in recv_from): pick the net (ZINC_NET / NCCL_NET, else the first of the registry),
 * connect one connection per channel for each peer and direction within ZINC_TIMEOUT, allocate a
 * shadow per peer and attach the engine to the proxy's progress thread (the caller holds the proxy:
 * zn_proxy_acquire). view[r] (by rank) is where the kernels find each such peer r (zeroed for
 * the others). */
ncclResult_t zn_gpunet_create(const struct zn_gpunet_config *cfg, struct zn_gpunet **out,
                              struct zn_gpunet_view view[]);

void zn_gpunet_get_info(const struct zn_gpunet *g, struct zn_gpunet_info *out);

/* Why the engine stopped (a net call failed), or NULL. */
const char *zn_gpunet_failure(const struct zn_gpunet *g);

/* Which peer closed its connections (kernels that waited for more from it ended with
 * ZN_DEV_PEER_GONE), or NULL. */
const char *zn_gpunet_gone(const struct zn_gpunet *g);

/* Device memory the engine holds (rows moved by GPUDirect RDMA; 0 when gdr_alloc is the
 * config's), for ncclCommMemStats. They stay while the communicator is suspended: the net has
 * them registered and the peers' connections on other hosts write into them. NULL: 0. */
size_t zn_gpunet_gpu_bytes(const struct zn_gpunet *g);

/* Detach from the progress thread and free everything; the device must be idle. NULL is
 * ignored. */
void zn_gpunet_destroy(struct zn_gpunet *g);

#endif
