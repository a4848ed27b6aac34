/*
 * One-sided operations (ncclPutSignal, ncclSignal, ncclWaitSignal): what rma.c (entry points,
 * groups, setup), rma_host.c (host communicators), rma_gpu.c (cuda communicators) and
 * rma_gin.c (the GIN engine between hosts) share. rma.c says how it all works.
 */
#ifndef ZN_API_RMA_H
#define ZN_API_RMA_H

#include "comm.h"
#include "group.h"

#include <pthread.h>
#include <stdatomic.h>

/* Signal indexes per (sender, context): sigIdx lies in [0, ZN_RMA_NSIG). */
#define ZN_RMA_NSIG 8

/* A registered window's parts that the one-sided calls need (window.c fills it). */
struct zn_devwin;
struct zn_rma_win;
struct zn_window_parts {
    void *buf;
    size_t size;
    struct zn_devwin *dw;   /* the device API's view: peers' mappings, GIN id */
    struct zn_rma_win *rma; /* the one-sided record (host communicators), or NULL */
};
/* 1 and *out if win is a window registered on c (looked up without dereferencing win). */
int zn_window_lookup(const struct ncclComm *c, ncclWindow_t win, struct zn_window_parts *out);

enum zn_rma_kind { ZN_RMA_PUT, ZN_RMA_SIGNAL, ZN_RMA_WAIT };

/* How this rank reaches a peer (the same on both sides of a pair). */
enum zn_rma_path {
    ZN_RMA_SELF = 0, /* this rank: a copy and a store of its own */
    ZN_RMA_SHM = 1,  /* host memory on one host: cross-memory attach, shm signal words */
    ZN_RMA_LSA = 2,  /* GPUs that map each other: kernels store into the peer's memory */
    ZN_RMA_GIN = 3,  /* everything else: the GIN engine over the net transport */
};

/* One queued operation (a group's ZN_GOP_RMA carries it in arg). */
struct zn_rma_op {
    enum zn_rma_kind kind;
    int peer, sig, ctx;
    const void *src;
    size_t bytes;
    struct zn_window_parts win; /* PUT */
    size_t off;                 /* PUT: in the peer's window */
    int ndesc;                  /* WAIT: descriptors, duplicates merged */
    ncclWaitSignalDesc_t *descs;
    void *stream;
};

/* A wait's descriptor once merged: the signals of one (peer, sigIdx, ctx) to consume. */
struct zn_rma_want {
    int peer, sig, ctx;
    uint64_t count;
};

struct zn_rma_host;
struct zn_rma_gpu;
struct zn_rma_gin;

/* A communicator's one-sided state (comm->rma). */
struct zn_rma {
    struct ncclComm *comm;
    int nctx;               /* config.numRmaCtx */
    size_t nwords;          /* signal words per rank: nranks * nctx * ZN_RMA_NSIG */
    int queued;             /* the setup waits in the caller's open group */
    int ready;              /* the setup ran on every rank */
    ncclResult_t setup_err; /* the setup failed: every later call fails alike */
    uint8_t *path;          /* per peer: enum zn_rma_path */
    void *shm_dom;          /* the shm transport's one-sided domain (host communicators), or NULL */
    struct zn_rma_host *host;
    struct zn_rma_gpu *gpu;
    struct zn_rma_gin *gin;
};

/* The word of signal (sender, ctx, sig) in a rank's array of nwords. */
static inline size_t zn_rma_word(const struct zn_rma *r, int sender, int ctx, int sig)
{
    return ((size_t)sender * (size_t)r->nctx + (size_t)ctx) * ZN_RMA_NSIG + (size_t)sig;
}

/* Run the group's one-sided operations of every communicator: the puts and signals (waits 0),
 * or the waits (waits 1). group.c calls it before and after the group's other operations. */
ncclResult_t zn_rma_run(struct zn_gop *ops, int n, int waits);
/* Free a queued operation (a dropped group's, or one that ran). */
ncclResult_t zn_rma_op_free(void *arg, int run);

/* The communicator's state, made on first need (not set up yet). */
ncclResult_t zn_rma_state(struct ncclComm *comm, struct zn_rma **out);

/* Lifecycle hooks: a window registered (collective) and deregistered (local), finalize
 * (collective: lets the GIN engine end its traffic with every peer), destroy and abort: first
 * zn_rma_stop (nothing arrives any more), then the windows, then zn_rma_free. */
ncclResult_t zn_rma_win_create(struct ncclComm *comm, void *buf, size_t size,
                               struct zn_rma_win **out);
void zn_rma_win_destroy(struct ncclComm *comm, struct zn_rma_win *w);
void zn_rma_finalize(struct ncclComm *comm);
void zn_rma_stop(struct ncclComm *comm);
void zn_rma_free(struct ncclComm *comm);

/* --- host communicators (rma_host.c) --------------------------------------------------- */
/* Collective: the shm domain, this rank's signal words and the paths; *need_gin: some pair
 * of the communicator goes through the GIN engine (the same on every rank). */
ncclResult_t zn_rma_host_setup(struct zn_rma *r, int *need_gin);
void zn_rma_host_fini(struct zn_rma *r);
ncclResult_t zn_rma_host_run(struct zn_rma *r, struct zn_rma_op **ops, int n);
ncclResult_t zn_rma_host_wait(struct zn_rma *r, const struct zn_rma_want *w, int n);
ncclResult_t zn_rma_host_win_create(struct ncclComm *comm, void *buf, size_t size,
                                    struct zn_rma_win **out);
void zn_rma_host_win_destroy(struct zn_rma_win *w);

/* --- cuda communicators (rma_gpu.c) ------------------------------------------------------ */
/* The path the setup will give peer (known before it: where every GPU maps every other). */
enum zn_rma_path zn_rma_gpu_path(const struct ncclComm *comm, int peer);
ncclResult_t zn_rma_gpu_setup(struct zn_rma *r, int *need_gin);
void zn_rma_gpu_fini(struct zn_rma *r);
ncclResult_t zn_rma_gpu_run(struct zn_rma *r, struct zn_rma_op **ops, int n);
ncclResult_t zn_rma_gpu_wait(struct zn_rma *r, const struct zn_rma_want *w, int n, void *stream);

/* --- the GIN engine between hosts (rma_gin.c) ------------------------------------------ */
/* Collective (every rank, also one that serves no peer through it): start the engine for the
 * peers whose path is ZN_RMA_GIN. */
ncclResult_t zn_rma_gin_setup(struct zn_rma *r);
/* drain: collective end of the traffic (finalize); else stop at once. */
void zn_rma_gin_destroy(struct zn_rma *r, int drain);
/* Host communicators: queue one put (bytes > 0) or signal to peer and return once the engine
 * has read the source (localbuff reusable). */
ncclResult_t zn_rma_gin_put(struct zn_rma *r, const struct zn_rma_op *op, uint32_t win_id);
/* Where the engine raises this rank's signal words (word zn_rma_word(r, sender, ctx, sig)):
 * the host's address, or (device 1) the GPU's. */
volatile uint64_t *zn_rma_gin_signals(struct zn_rma *r, int device);
/* ncclSuccess, or the engine's failure as an error of fn naming what failed. */
ncclResult_t zn_rma_gin_check(struct zn_rma *r, const char *fn);
/* cuda communicators: the FIFO as kernels see it (dev_abi.h's struct zn_dev_gin). */
struct zn_dev_gin;
void zn_rma_gin_dev(struct zn_rma *r, struct zn_dev_gin *out);

#endif
