/*
 * The proxy: a progress thread that runs work posted to it from the GPU's streams. Today one
 * proxy serves one staged cuda communicator: the host side posts an opaque descriptor and gets
 * its id, a one-thread kernel rings the doorbell with that id in stream order, and the progress
 * thread hands the descriptor to the owner's run callback, then marks it done so that the gate
 * kernel lets the stream go on (the kernels and the doorbell layout: abi/dev_abi.h).
 *
 * The proxy knows nothing of collectives: what a descriptor means is the owner's business
 * (exec registers "run a staged collective"). That keeps it below the algorithms, where the
 * network layer can grow it into one proxy per process and GPU (a service thread for requests,
 * and this progress thread also driving net transfers) without touching exec.
 */
#ifndef ZN_PROXY_PROXY_H
#define ZN_PROXY_PROXY_H

#include "abi/dev_abi.h"
#include "util/err.h"

#include <stddef.h>
#include <stdint.h>

struct zn_proxy;

/* What the owner of a proxy does with its descriptors. Every slot is filled. */
struct zn_proxy_ops {
    size_t size; /* sizeof(struct zn_proxy_ops): checked by zn_proxy_create */
    /* Run one posted descriptor on the progress thread. Returns nonzero to keep it posted
     * (a captured graph replays the same id), zero to have the proxy release it. */
    int (*run)(void *owner, void *desc);
    /* Free a descriptor the proxy no longer holds: after a run that did not keep it, and at
     * zn_proxy_destroy for every descriptor still posted. */
    void (*release)(void *owner, void *desc);
};

struct zn_proxy_config {
    const struct zn_proxy_ops *ops;
    void *owner;  /* passed to every callback */
    int cuda_dev; /* the progress thread's current device */
    int rank;     /* the progress thread's log prefix */
};

/* Allocate the doorbell and start the progress thread. */
ncclResult_t zn_proxy_create(const struct zn_proxy_config *cfg, struct zn_proxy **out);

/* Post a descriptor: the returned id is what the signal kernel rings the doorbell with. From
 * here on the progress thread may run and release desc at any time (the GPU can reach the
 * doorbell before the poster reads desc again), so the poster must not touch it afterwards. */
ncclResult_t zn_proxy_post(struct zn_proxy *p, void *desc, uint64_t *id);

/* The device views the signal and gate kernels take (zn_dev_launch_signal / _wait). */
struct zn_dev_doorbell *zn_proxy_bell_dev(const struct zn_proxy *p);
uint64_t *zn_proxy_seq_dev(const struct zn_proxy *p);

/* Log every staging thread of the process (doorbell signals rung and run, descriptors posted,
 * time since the last run) for the state dump. Any thread. */
void zn_proxy_staging_dump(void);

/* Stop the progress thread (the device must be idle), release what is still posted, free
 * everything. NULL is ignored. */
void zn_proxy_destroy(struct zn_proxy *p);

#endif
