/*
 * GIN between hosts: the host engine of a device communicator (gin.c).
 *
 * Kernels hand GIN operations for peers outside their LSA team to this engine through a FIFO
 * in host memory (include/nccl_device/gin_proxy.h). One engine thread per device communicator
 * takes them in order, reads each source (a copy through ops->copy: cudaMemcpy for device
 * memory, memcpy in the host-only tests), sends header and bytes to the peer's engine over the
 * net transport (socket, IB, plugins), and raises the request's counter. The peer's engine
 * writes the bytes into the target window (ops->copy again), and only then adds to the signal:
 * NCCL's rule that a signal attached to a put is seen after the put's data. Messages between
 * two engines arrive in the order they were sent, so puts and signals from one rank to another
 * land in issue order too.
 *
 * The engine knows nothing of communicators: it gets the transport context, which peers it
 * serves, the FIFO and signal arrays (host addresses) and the copy and window lookup, so that
 * tests/proxy drives it with host memory alone.
 */
#ifndef ZN_PROXY_GIN_H
#define ZN_PROXY_GIN_H

#include "nccl_device/gin_proxy.h"
#include "transport/transport.h"

struct zn_gin;

struct zn_gin_ops {
    /* Copy n bytes between host memory and a window's memory (either direction); done when it
     * returns. Called by the engine thread. */
    ncclResult_t (*copy)(void *ctx, void *dst, const void *src, size_t n);
    /* Where bytes [off, off + len) of window win are in this process; an error (logged) if win
     * is unknown or the range is outside it. Called by the engine thread. */
    ncclResult_t (*resolve)(void *ctx, uint32_t win, uint64_t off, uint64_t len, void **ptr);
    /* The engine failed with res (logged already); called once, by the engine thread. */
    void (*failed)(void *ctx, ncclResult_t res);
    /* Called by the engine thread before anything else (the CUDA device to use); may be NULL. */
    ncclResult_t (*thread_init)(void *ctx);
};

struct zn_gin_args {
    const struct zn_tctx *tctx; /* copied; its boot and abort flag must outlive the engine */
    const uint8_t *net_peer;    /* nranks entries: 1 for the peers this engine serves */
    struct zincGinProxy *proxy; /* host address of the FIFO record */
    struct zincGinRequest *slots;
    uint64_t *net_signals, *net_counters; /* host addresses */
    int nsignals, ncounters;
    const struct zn_gin_ops *ops;
    void *ctx;
};

/* Collective over the communicator (every rank, once, in the same order as its other
 * collective setup): open the net transport, start the engine thread. */
ncclResult_t zn_gin_create(const struct zn_gin_args *args, struct zn_gin **out);

/* With drain, collective: serve what is queued, tell every peer that this rank is done, wait
 * until every peer said so (all their operations to this rank are applied), wait for every
 * rank to get there (a bootstrap barrier), then stop and free; bounded by ZINC_TIMEOUT, and
 * after a failure it only frees. Without drain: stop at once
 * and free (abort, or a communicator freed with device communicators alive). */
void zn_gin_destroy(struct zn_gin *g, int drain);

/* ncclSuccess, or the error the engine failed with (ncclRemoteError when a peer died). */
ncclResult_t zn_gin_status(struct zn_gin *g);

/* Host-side producer (tests, and the same protocol as the device's): queue one request
 * (seq is set here), waiting while the FIFO is full; head is the ticket counter. Fails with
 * ncclRemoteError if the engine failed. Thread safe. */
ncclResult_t zn_gin_push(struct zincGinProxy *proxy, struct zincGinRequest *slots, uint64_t *head,
                         const struct zincGinRequest *req);

#endif
