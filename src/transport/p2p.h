/*
 * The p2p transport: device memory of every GPU of a communicator mapped into every other
 * GPU of it, for kernels that load and store peers' memory directly (NVLink or PCIe).
 *
 * Each rank allocates one arena on its GPU. Peers map it:
 *  - in the same process: the pointer itself, once peer access is enabled between the devices;
 *  - in another process: a cuMem allocation exported as a POSIX file descriptor, passed over a
 *    Unix domain socket (SCM_RIGHTS) and imported; where cuMem file descriptors are not
 *    available, a cudaMalloc allocation shared with a legacy CUDA IPC handle.
 * Setup is collective over the communicator and bounded by ZINC_TIMEOUT.
 */
#ifndef ZN_TRANSPORT_P2P_H
#define ZN_TRANSPORT_P2P_H

#include "transport.h"
#include "util/cuda.h"

#define ZN_P2P_MAX_RANKS 8

struct zn_p2p {
    int rank, nranks, dev;
    size_t bytes;
    void *peer[ZN_P2P_MAX_RANKS]; /* every arena as this device sees it (own at [rank]) */
    /* private */
    int local_kind; /* 0: cuMem, 1: cudaMalloc */
    struct zn_cumem local;
    int peer_kind[ZN_P2P_MAX_RANKS]; /* 0: own / same process, 1: cuMem import, 2: IPC */
    struct zn_cumem imported[ZN_P2P_MAX_RANKS];
};

/* Whether the GPUs of the communicator can all map each other's memory: every rank on this
 * host, at most ZN_P2P_MAX_RANKS of them, every pair peer-capable, ZINC_P2P_DISABLE unset.
 * bus_ids[r] is rank r's GPU ("0000:1b:00.0"); the answer is the same on every rank. */
int zn_p2p_usable(const struct zn_tctx *ctx, const char (*bus_ids)[20], char *why, size_t len);

/* Collective: allocate this rank's arena of bytes on dev (zeroed) and map everyone's. */
ncclResult_t zn_p2p_create(const struct zn_tctx *ctx, int dev, size_t bytes, struct zn_p2p **out);
void zn_p2p_destroy(struct zn_p2p *p);

#endif
