/*
 * The process service as a transport sees it. Each process runs one service thread (the
 * proxy's, src/proxy/service.c) on a Unix socket that local ranks of other processes ask for
 * things that must cross a process boundary: a GPU memory handle as a file descriptor, the
 * mapping of a registered buffer. The proxy sits above the transports, so a transport reaches
 * it only through this table, which the layer that owns the communicator fills (zn_tctx.svc);
 * the proxy in turn knows nothing of what a transport's requests mean: it routes each one by
 * type, communicator and rank to the handler the transport registered.
 */
#ifndef ZN_TRANSPORT_SVC_H
#define ZN_TRANSPORT_SVC_H

#include "nccl.h"

#include <stdint.h>

/* Request types. The first three are the service's own; the rest are handed to handlers. */
enum zn_svc_type {
    ZN_SVC_HELLO = 1,       /* version check: answered with struct zn_pxw_hello */
    ZN_SVC_CLOSE = 2,       /* the client is done: the service closes the connection */
    ZN_SVC_STOP = 3,        /* only from this process: stop the service thread */
    ZN_SVC_ARENA_FD = 4,    /* p2p: the fd of rank dst's cuMem arena */
    ZN_SVC_REG_SHARE = 5,   /* p2p: map the registered buffer whose fd comes along */
    ZN_SVC_REG_UNSHARE = 6, /* p2p: unmap it */
    ZN_SVC_NTYPES
};

#define ZN_SVC_MAX_BODY 1024

/* A handler's view of one request and its answer. */
struct zn_svc_req {
    uint32_t src;     /* the asking rank */
    const void *body; /* len bytes, checked against ZN_SVC_MAX_BODY */
    uint32_t len;
    int fd; /* a descriptor that came with it, or -1; the service closes it after the call */
};
struct zn_svc_reply {
    void *body; /* room for ZN_SVC_MAX_BODY bytes */
    uint32_t len;
    int fd; /* set >= 0 to pass a descriptor back; the service closes it after sending */
};

/* Runs on the service thread; may block only briefly (other clients wait). Returns the status
 * the caller sees (it logs its own errors). */
typedef ncclResult_t (*zn_svc_fn)(void *arg, const struct zn_svc_req *req,
                                  struct zn_svc_reply *rep);

struct zn_svc {
    void *ctx;
    /* Answer requests of type addressed to (comm_hash, rank) with fn(arg). User thread. */
    ncclResult_t (*serve)(void *ctx, int type, uint64_t comm_hash, int rank, zn_svc_fn fn,
                          void *arg);
    /* Stop answering them; when it returns, fn is not running and will not run again. */
    void (*unserve)(void *ctx, int type, uint64_t comm_hash, int rank);
    /* Ask the service of process pid (pid namespace pid_ns) on this host, for rank dst of
     * comm_hash. Blocks until the answer or deadline. Returns 0 and fills rep (rep->body has
     * room for cap bytes; rep->fd = -1 when none came), -ETIMEDOUT, -ECONNREFUSED (no
     * service yet: the caller retries until its deadline) or another negative errno; *status
     * gets the handler's result. */
    int (*call)(void *ctx, int32_t pid, uint64_t pid_ns, int type, uint64_t comm_hash, int dst,
                int src, const struct zn_svc_req *req, struct zn_svc_reply *rep, uint32_t cap,
                ncclResult_t *status, int64_t deadline);
};

#endif
