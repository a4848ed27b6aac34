/*
 * The proxy's progress thread: it drives net operations posted in rings, and the progress
 * callbacks of its clients (below). A rank (or a transport on its behalf) posts isend / irecv
 * descriptors on an ncclNet_t connection through a ring it owns; the progress thread issues
 * them, tests them until they complete, and writes each op's status word. Nothing here blocks
 * the poster except zn_proxy_net_wait, which is bounded.
 *
 * The ring is single-producer, single-consumer and lock-free: the poster writes slots and
 * publishes head with a release store, the progress thread reads up to head (acquire) and
 * publishes tail. One ring per posting thread (a communicator's), so there is never a second
 * producer. An op descriptor lives in the poster's memory; the progress thread reads the
 * request fields and writes only the status fields, and does not touch the op once its status
 * is DONE or ERROR (the poster may reuse it then).
 */
#ifndef ZN_PROXY_PROGRESS_H
#define ZN_PROXY_PROGRESS_H

#include "net/nccl_net.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define ZN_PROXY_RING 256 /* slots per ring (a power of two) */

enum zn_netop_status {
    ZN_NETOP_POSTED = 0, /* in the ring, not yet seen by the progress thread */
    ZN_NETOP_ISSUED = 1, /* isend / irecv accepted by the net; being tested */
    ZN_NETOP_DONE = 2,   /* complete: nbytes is valid */
    ZN_NETOP_ERROR = 3,  /* the net failed it: result says how (logged by the net) */
};

struct zn_proxy_netop {
    /* Filled by the poster before zn_proxy_net_post. */
    const ncclNet_t *net;
    void *comm; /* a send comm (is_send) or a recv comm of net */
    int is_send;
    int tag;
    void *data;
    size_t size; /* bytes to send; room to receive */
    void *mhandle;
    int peer; /* the remote rank, for the dump and messages (-1: not said) */
    /* Written by the progress thread. */
    atomic_int status;   /* enum zn_netop_status; release-stored last */
    ncclResult_t result; /* valid at ZN_NETOP_ERROR */
    size_t nbytes;       /* bytes moved, valid at ZN_NETOP_DONE */
    uint32_t tests;      /* test() calls so far (the dump's step counter) */
    void *request;
    int64_t posted_ns;
};

struct zn_proxy_ring;

/* A ring attached to the progress thread (between zn_proxy_acquire and zn_proxy_release).
 * name appears in the dump ("rank 3 -> net"). */
ncclResult_t zn_proxy_ring_create(const char *name, struct zn_proxy_ring **out);
/* Detach and free. Ops still in flight are abandoned (their requests are never tested again,
 * as after closeSend/closeRecv): close the net comms after this. NULL is ignored. */
void zn_proxy_ring_destroy(struct zn_proxy_ring *r);

/* Post op (status set to POSTED here). Returns 0, or -EAGAIN when the ring is full (the
 * caller waits for one of its earlier ops and retries). Never blocks. */
int zn_proxy_net_post(struct zn_proxy_ring *r, struct zn_proxy_netop *op);

/* The op's status without waiting (enum zn_netop_status): what a non-blocking data path polls.
 * At DONE or ERROR the result fields are valid (acquire pairs with the progress thread's
 * release). */
static inline int zn_proxy_net_status(const struct zn_proxy_netop *op)
{
    return atomic_load_explicit(&op->status, memory_order_acquire);
}

/* Wait until op is DONE or ERROR, at most until deadline (ns, zn_now_ns clock) or while
 * *abort_flag (may be NULL) stays 0. Returns the op's outcome, or an error naming the wait. */
ncclResult_t zn_proxy_net_wait(struct zn_proxy_netop *op, int64_t deadline,
                               const atomic_int *abort_flag);

/* Other work the progress thread drives on every pass, next to the rings: an owner whose net
 * connections are fed from elsewhere than a poster's ring (the GPU net engine, gpu_net_engine.h,
 * whose ops come from kernels' counters). progress() returns nonzero when something moved; it runs
 * on the progress thread with the thread's lock held, so it must not block, and once
 * zn_proxy_progress_remove returned it does not run again. dump() (may be NULL) prints the
 * owner's state for the state dump. */
struct zn_proxy_progress_client {
    int (*progress)(void *arg);
    void (*dump)(void *arg);
    void *arg;
    struct zn_proxy_progress_client *next; /* the progress thread's list */
};
void zn_proxy_progress_add(struct zn_proxy_progress_client *cl);
void zn_proxy_progress_remove(struct zn_proxy_progress_client *cl);

/* The progress thread (service.c starts and stops it with the service). */
ncclResult_t zn_proxy_progress_start(void);
void zn_proxy_progress_stop(void);
/* Print the rings, the ops in flight and the time since the last progress (for the dump). */
void zn_proxy_progress_dump(void);

#endif
