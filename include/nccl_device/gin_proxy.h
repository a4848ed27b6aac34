/*
 * nccl_device/gin_proxy.h -- zinc's GIN between hosts: the FIFO through which a kernel hands a
 * GIN operation for a peer outside its LSA team to a host thread of the device communicator
 * (src/proxy/gin.c), which carries it over zinc's net transport. Plain C, shared by the device
 * half (nccl_device/gin.h) and the host engine.
 *
 * ncclDevComm.ginHandles[2] points to a struct zincGinProxy in pinned host memory mapped into
 * the GPU (NULL when every rank of the communicator is in the caller's LSA team):
 *
 *   producer (kernel)                                consumer (engine thread)
 *   t = atomicAdd(head, 1)        (device memory)
 *   wait until t < tail + nslots                     while slots[tail % nslots].seq == tail + 1:
 *   fill slots[t % nslots], fence, seq = t + 1         read the request, read its source,
 *                                                      counter += 1 (if asked), tail += 1
 *
 * Signals and counters that the engine raises live in two more mapped arrays (netSignals,
 * netCounters): a signal's value as a kernel reads it is the sum of its word in the resource
 * window (raised by LSA peers' atomics) and its word here (raised by the engine for peers on
 * other hosts), so the two writers never race on one word. A nonzero error stops every wait of
 * the kernels on this device communicator: the engine failed (a peer died) and said why in the
 * log and in ncclCommGetAsyncError.
 */
#ifndef ZINC_NCCL_DEVICE_GIN_PROXY_H_
#define ZINC_NCCL_DEVICE_GIN_PROXY_H_

#include <stdint.h>

#define ZINC_GIN_FIFO_SLOTS 512 /* requests a device communicator can have queued */

/* Request kinds. */
#define ZINC_GIN_OP_PUT       1u /* bytes from src (this process's address) to the peer */
#define ZINC_GIN_OP_PUT_VALUE 2u /* bytes (1..8) of the value in src */
#define ZINC_GIN_OP_SIGNAL    3u /* the signal alone */

/* Request flags. */
#define ZINC_GIN_F_SIGNAL_INC 1u /* peer's signal += 1 after the data */
#define ZINC_GIN_F_SIGNAL_ADD 2u /* peer's signal += signalValue after the data */
#define ZINC_GIN_F_COUNTER    4u /* this rank's counter += 1 once the source was read */

/* The window id of the device communicator's resource window; registered windows have ids
 * from 1, in registration order (the same on every rank). Kept in ncclWindow_vidmem's
 * ginOffset4K. */
#define ZINC_GIN_WINDOW_RESOURCE 0u

struct zincGinRequest {
    uint64_t seq; /* ticket + 1: written last, says the slot is filled */
    uint32_t op;
    int32_t peer;       /* world rank */
    uint64_t src;       /* PUT: source address; PUT_VALUE: the value */
    uint64_t dstOffset; /* in the peer's window dstWindow */
    uint64_t bytes;
    uint32_t dstWindow;
    uint32_t flags;
    uint32_t signal, counter;
    uint64_t signalValue;
};

struct zincGinProxy {
    /* written by the engine, read by kernels */
    uint64_t tail;  /* requests taken: their slots may be refilled, their sources reused */
    uint32_t error; /* nonzero once the engine failed */
    uint32_t nslots;
    /* set up by the host before the first kernel (device addresses) */
    uint64_t *head; /* tickets handed out, in device memory */
    struct zincGinRequest *slots;
    uint64_t *netSignals;  /* the engine's share of each signal */
    uint64_t *netCounters; /* the engine's share of each counter */
};

#if defined(__cplusplus)
static_assert(sizeof(struct zincGinRequest) == 64, "zincGinRequest is one 64-byte slot");
static_assert(sizeof(struct zincGinProxy) == 48, "zincGinProxy layout");
#else
_Static_assert(sizeof(struct zincGinRequest) == 64, "zincGinRequest is one 64-byte slot");
_Static_assert(sizeof(struct zincGinProxy) == 48, "zincGinProxy layout");
#endif

#endif
