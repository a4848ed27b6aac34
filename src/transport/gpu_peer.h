/*
 * The p2p transport: device memory of every GPU of a communicator mapped into the other GPUs
 * of it that kernels reach directly (NVLink or PCIe): all of them where every pair can, else
 * the neighbours on a ring of GPUs (the caller picks: topo/reach.h decides what reaches what).
 *
 * Each rank allocates one arena on its GPU. Peers map it:
 *  - in the same process: the pointer itself, once peer access is enabled between the devices;
 *  - in another process: a cuMem allocation exported as a POSIX file descriptor, handed out by
 *    the owner's process service (the proxy's Unix socket, SCM_RIGHTS; zn_tctx.svc) and imported;
 * where cuMem file descriptors are not available, a cudaMalloc allocation shared with a legacy CUDA
 * IPC handle. Setup is collective over the communicator and bounded by ZINC_TIMEOUT.
 */
#ifndef ZN_TRANSPORT_GPU_PEER_H
#define ZN_TRANSPORT_GPU_PEER_H

#include "reg.h"
#include "transport.h"
#include "util/cuda.h"

#define ZN_P2P_MAX_RANKS 8 /* GPUs of a communicator on one host */
#define ZN_P2P_MAX_COMM                                                 \
    64 /* ranks of a communicator across hosts whose arenas some map (a \
          ring: each maps its neighbours on its host) */

struct zn_p2p {
    int rank, nranks, dev;
    size_t bytes;
    void *peer[ZN_P2P_MAX_COMM]; /* arenas as this device sees them (own at [rank]; NULL for
                                    peers not mapped) */
    /* private */
    int local_kind; /* 0: cuMem, 1: cudaMalloc */
    struct zn_cumem local;
    int peer_kind[ZN_P2P_MAX_COMM]; /* 0: own / same process, 1: cuMem import, 2: IPC */
    struct zn_cumem imported[ZN_P2P_MAX_COMM];
    int suspended; /* zn_p2p_suspend: the cuMem memory is released (ranges kept) */
    void *saved;   /* meanwhile, the first saved_bytes of the own arena */
    size_t saved_bytes;
};

/* Collective: allocate this rank's arena of bytes on dev (zeroed) and map the arenas of the peers
 * r with want[r] set (every rank's wishes must be symmetric: r maps q exactly when q maps r).
 * At most ZN_P2P_MAX_COMM ranks. */
ncclResult_t zn_p2p_create(const struct zn_tctx *ctx, int dev, size_t bytes, const uint8_t *want,
                           struct zn_p2p **out);
void zn_p2p_destroy(struct zn_p2p *p);

/* Device memory of this rank's own arena: the allocation's size (cuMem rounds it up to the
 * granularity); *releasable says whether zn_p2p_suspend gives it back (cuMem memory, whose
 * address range can stay reserved; a cudaMalloc arena cannot come back at the same address). */
size_t zn_p2p_own_bytes(const struct zn_p2p *p, int *releasable);

/* Suspension (ncclCommSuspend / ncclCommResume), collective over ctx's ranks, every one with
 * an arena. zn_p2p_suspend: the caller has made sure that no kernel of any rank uses the
 * arenas (each rank synchronised its device, then all met); the first keep bytes of the own
 * arena (its control words) are copied to host memory, then every rank unmaps the cuMem arenas
 * of its peers and releases its own, keeping the address ranges reserved; the memory is back
 * in the driver's hands when every rank has returned (the final barrier). If the copy fails on
 * some rank, nothing is released anywhere and every rank returns an error.
 * zn_p2p_resume: new memory at the same addresses, the own arena zeroed but for the kept
 * bytes, the peers' arenas mapped again (fds from their process services, as at creation);
 * every pointer handed out before (kernel arguments, captured graphs) is valid again. If it
 * fails on some rank, every rank releases again and returns an error, so that resume can be
 * retried. Arenas of cudaMalloc memory (the CUDA IPC fallback) stay mapped throughout. */
ncclResult_t zn_p2p_suspend(const struct zn_tctx *ctx, struct zn_p2p *p, size_t keep);
ncclResult_t zn_p2p_resume(const struct zn_tctx *ctx, struct zn_p2p *p);

/* Registered buffers: every rank has handlers on its process service (zn_tctx.svc) that map
 * the buffers its peers register, for the life of the communicator. zn_p2p_reg_share sends fd (a
 * cuMem allocation of size bytes, exported as a POSIX fd) to every peer and returns where each
 * one mapped it (peer_ptr[r]; own entry untouched); no peer keeps it if one fails.
 * zn_p2p_reg_unshare asks peer (or every peer, -1) to unmap it. Neither needs the peers'
 * application threads, so registering is a local call, as NCCL has it. */
struct zn_p2p_reg;
ncclResult_t zn_p2p_reg_start(const struct zn_tctx *ctx, int dev, struct zn_p2p_reg **out);
void zn_p2p_reg_stop(struct zn_p2p_reg *s);
ncclResult_t zn_p2p_reg_share(const struct zn_tctx *ctx, int fd, size_t size, uint32_t id,
                              void **peer_ptr);
void zn_p2p_reg_unshare(const struct zn_tctx *ctx, uint32_t id, int peer);

/* The transport's tables (gpu_peer_ops.c). zn_transport_p2p: init starts the registration service
 * (a local call, on the rank's GPU of its peer info); connect gives a connection for one-sided
 * operations; reg shares a buffer's cuMem allocation with every peer and records it in the
 * state's registration table (other memory: *handle NULL, nothing registered); dereg waits for
 * the device and asks the peers to unmap; fini stops the service (peers' services drop what
 * they imported when they stop). zn_p2p_collmem: the arenas above (a struct zn_p2p per rank;
 * args->want as zn_p2p_create's, NULL for every peer). zn_p2p_rma: puts and signals into
 * registered regions of peers. */
extern const struct zn_transport_collmem_ops zn_p2p_collmem;
extern const struct zn_transport_rma_ops zn_p2p_rma;
/* zn_p2p_rma's one-sided use on its own (gpu_peer_rma.c): a domain (tagged by its first word, so
 * that the table's key slots tell it from zn_transport_p2p's state) shares cudaMalloc memory
 * through CUDA IPC handles; its connections' puts are copies on the domain's stream. */
#define ZN_P2P_DOM_MAGIC 0x7a6e703270646f6dull /* "znp2pdom" */
struct zn_p2p_dom;
int zn_p2p_is_dom(const void *state);
ncclResult_t zn_p2p_dom_open(const struct zn_tctx *ctx, void **dom);
void zn_p2p_dom_close(void *dom);
ncclResult_t zn_p2p_dom_mem_alloc(void *dom, size_t len, int nmappers, void **ptr, void **handle);
void zn_p2p_dom_mem_free(void *dom, void *handle);
ncclResult_t zn_p2p_dom_mem_reg(void *dom, void *buf, size_t len, void **handle);
void zn_p2p_dom_mem_dereg(void *dom, void *handle);
ncclResult_t zn_p2p_dom_key_pack(void *dom, void *handle, struct zn_rma_key *key);
ncclResult_t zn_p2p_dom_key_import(void *dom, int peer, const struct zn_rma_key *key,
                                   void **remote);
ncclResult_t zn_p2p_dom_key_release(void *dom, void *remote);
void *zn_p2p_dom_remote_addr(void *remote, size_t *len);
ncclResult_t zn_p2p_dom_ep_open(void *dom, const struct zn_rma_ep_args *a, struct zn_conn **c,
                                struct zn_rma_key *desc);
void zn_p2p_dom_ep_close(struct zn_conn *c);
ncclResult_t zn_p2p_dom_put(struct zn_conn *c, void *local, size_t loff, void *remote, size_t roff,
                            size_t len);
ncclResult_t zn_p2p_dom_signal(struct zn_conn *c, void *remote, size_t roff, uint64_t value);
ncclResult_t zn_p2p_dom_flush(struct zn_conn *c);

/* The registrations of a zn_transport_p2p state (NULL state: none), for zero-copy lookups. */
const struct zn_reg_table *zn_p2p_regs(void *state);

#endif
