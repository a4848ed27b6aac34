/*
 * The proxy's GPU net engine: ring hops between hosts for the GPU kernels of a cuda
 * communicator, carried over a net of src/net by the proxy's progress thread (netops.h).
 *
 * A ring neighbour on another host gets a net shadow as its arena[] (abi/dev_abi.h): pinned,
 * device-mapped host memory that the kernel writes as if it were the peer's arena, and where
 * it finds what comes from that peer (fifo.cuh, inbox()). Per channel there is one net
 * connection each way, and the engine moves slots in FIFO order; it makes no CUDA call, so a
 * slot costs no copy-engine work and no GPU time besides the kernel's own loads and stores
 * (NCCL's net transport without GPUDirect works the same way):
 *
 * Each FIFO through a shadow has ZN_DEV_NET_NBUF slots (NCCL's NCCL_STEPS), as have the arenas
 * of a communicator across hosts, and the ring kernels move 4 of them per step (coll_ring.cuh's
 * ring_steps): the net's round trip, and peers whose kernels take turns on a GPU, need more in
 * flight per channel than one slot.
 *
 *   sending (next is remote): kernel fills slot k of row 0 of shadow(next), raises ready[me][ch]
 *     -> engine isends the slot (its byte count from ZN_DEV_NETSIZE_OFF) -> when the send
 *     completes, stores the count of sent slots into ack[next][ch] of shadow(next), where the
 *     kernel's reserve() waits for it.
 *   receiving (prev is remote): engine irecvs into slot k of row 1 of shadow(prev) once
 *     the kernel drained it (ack[me][ch] in shadow(prev), written by release()) -> when the
 *     receive completes, stores the new count into ready[prev][ch] of shadow(prev) (a release
 *     store after the bytes); the kernel's consume() waits for it, fences system-wide and
 *     reads the slot from host memory.
 *
 * Counters never reset, so graph replays and later launches continue where the last one
 * stopped, as on the NVLink path. The engine never blocks: a failed net call records the
 * failure, raises the communicator's device abort word (its kernels end with an error) and
 * stops the engine; zn_gpunet_failure reports it.
 */
#ifndef ZN_PROXY_GPUNET_H
#define ZN_PROXY_GPUNET_H

#include "transport/transport.h"
#include "util/err.h"

#include <stddef.h>
#include <stdint.h>

#define ZN_GPUNET_MAX_CH 16

struct zn_gpunet;

struct zn_gpunet_config {
    const struct zn_tctx *ctx; /* rank, peers, bootstrap (collective setup) */
    int next, prev;            /* ring neighbours */
    int next_remote, prev_remote;
    int nch; /* channels of the arena layout (every rank the same) */
    size_t slot_bytes;
    volatile uint32_t *abort_word; /* host view of the kernels' abort word */
    /* Where the shadows live. NULL: pinned host memory mapped into the device (cudaHostAlloc),
     * what the kernels need. A test that stands in for the kernels with host code passes
     * plain memory (host == dev) and runs the engine without a GPU. */
    ncclResult_t (*shadow_alloc)(void **host, void **dev, size_t size);
    void (*shadow_free)(void *host);
};

/* Collective over every rank of the communicator (ranks with no remote neighbour take part in
 * the exchange and start nothing): pick the net (ZINC_NET / NCCL_NET, else the first of the
 * registry), connect one send and one receive connection per channel to the remote ring
 * neighbours within ZINC_TIMEOUT, allocate the shadows and attach the engine to the proxy's
 * progress thread (the caller holds the proxy: zn_proxy_acquire). shadow_dev[r] is the device
 * pointer to put in arena[r] for each remote neighbour r (NULL for the others). */
ncclResult_t zn_gpunet_create(const struct zn_gpunet_config *cfg, struct zn_gpunet **out,
                              uint8_t *shadow_dev[]);

/* Why the engine stopped (a net call failed), or NULL. */
const char *zn_gpunet_failure(const struct zn_gpunet *g);

/* Detach from the progress thread and free everything; the device must be idle. NULL is
 * ignored. */
void zn_gpunet_destroy(struct zn_gpunet *g);

#endif
