/*
 * The proxy's staging client: runs work posted to it from the GPU's streams. One staging
 * client serves one staged cuda communicator: the host side posts an opaque descriptor and gets
 * its id, a one-thread kernel rings the doorbell with that id in stream order, and the
 * process's proxy progress thread (progress.h, which it joins as a client) hands the descriptor
 * to the owner's step callback, pass after pass until it is finished, then marks it done so
 * that the gate kernel lets the stream go on (the kernels and the doorbell layout:
 * abi/dev_abi.h). Steps never block, so the staged communicators of a process, its GPU net
 * engines and its posted net ops all move on one thread.
 *
 * The staging client knows nothing of collectives: what a descriptor means is the owner's business
 * (exec registers "run a staged collective"). That keeps it below the algorithms.
 */
#ifndef ZN_PROXY_STAGING_CLIENT_H
#define ZN_PROXY_STAGING_CLIENT_H

#include "abi/dev_abi.h"
#include "util/err.h"

#include <stddef.h>
#include <stdint.h>

struct zn_staging_client;

/* What step returns. */
enum zn_staging_step {
    ZN_STAGING_RUNNING = 0, /* not finished: step again on a later pass */
    ZN_STAGING_DONE = 1,    /* finished: the proxy releases the descriptor */
    ZN_STAGING_KEEP = 2,    /* finished, and stays posted (a captured graph replays the same id) */
};

/* What the owner of a staging client does with its descriptors. Every slot is filled. */
struct zn_staging_client_ops {
    size_t size; /* sizeof(struct zn_staging_client_ops): checked by zn_staging_client_create */
    /* Advance one posted descriptor on the progress thread without blocking; *moved = 1 when
     * something progressed. Returns enum zn_staging_step. The descriptor in hand is finished
     * before the next doorbell signal is looked at. */
    int (*step)(void *owner, void *desc, int *moved);
    /* Free a descriptor the proxy no longer holds: after a run that did not keep it, and at
     * zn_staging_client_destroy for every descriptor still posted. */
    void (*release)(void *owner, void *desc);
};

struct zn_staging_client_config {
    const struct zn_staging_client_ops *ops;
    void *owner;  /* passed to every callback */
    int cuda_dev; /* the device steps run on */
    int rank;     /* the log prefix of steps */
};

/* Allocate the doorbell and join the progress thread (the caller holds the process's proxy:
 * zn_proxy_acquire). */
ncclResult_t zn_staging_client_create(const struct zn_staging_client_config *cfg,
                                      struct zn_staging_client **out);

/* Post a descriptor: the returned id is what the signal kernel rings the doorbell with. From
 * here on the progress thread may run and release desc at any time (the GPU can reach the
 * doorbell before the poster reads desc again), so the poster must not touch it afterwards. */
ncclResult_t zn_staging_client_post(struct zn_staging_client *p, void *desc, uint64_t *id);

/* The device views the signal and gate kernels take (zn_dev_launch_signal / _wait). */
struct zn_dev_doorbell *zn_staging_client_bell_dev(const struct zn_staging_client *p);
uint64_t *zn_staging_client_seq_dev(const struct zn_staging_client *p);

/* Leave the progress thread (the device must be idle), release what is still posted, free
 * everything. NULL is ignored. */
void zn_staging_client_destroy(struct zn_staging_client *p);

#endif
