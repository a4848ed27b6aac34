/* Group semantics: calls between ncclGroupStart and ncclGroupEnd are queued per thread and
 * issued together. A call outside any group is a group of one. */
#ifndef ZN_API_GROUP_H
#define ZN_API_GROUP_H

#include "comm.h"

enum zn_gop_kind { ZN_GOP_COLL, ZN_GOP_SEND, ZN_GOP_RECV, ZN_GOP_INIT, ZN_GOP_DEFER, ZN_GOP_RMA };

/* A deferred call (ZN_GOP_DEFER): fn(arg, 1) runs it at ncclGroupEnd, fn(arg, 0) only frees
 * arg (the group was dropped). A one-sided operation (ZN_GOP_RMA, rma.h) is arg, freed by
 * fn(arg, 0). */
typedef ncclResult_t (*zn_defer_fn)(void *arg, int run);

struct zn_gop {
    enum zn_gop_kind kind;
    struct ncclComm *comm;
    struct zn_coll_args a;
    struct zn_op_desc op;
    void *stream;           /* cuda communicators */
    const void *scalar_dev; /* PreMulSum with ncclScalarDevice on a cuda communicator */
    struct zn_join join;    /* ZN_GOP_INIT */
    zn_defer_fn fn;         /* ZN_GOP_DEFER */
    void *arg;
};

/* Queue op (copied) in the current group, or run it now when no group is open. */
ncclResult_t zn_group_submit(const struct zn_gop *op);
/* Whether this thread is inside a group. */
int zn_group_depth(void);
/* A collective management call (window registration, device communicator creation) made
 * inside a group: run fn at ncclGroupEnd, before the group's operations. Each such call blocks
 * until the peers of its communicator make it too, and one thread may be the caller for
 * several of those peers (one process driving several GPUs), so when a group holds several
 * they run on threads of their own, together. Outside a group fn runs now. Takes arg. */
ncclResult_t zn_group_defer(struct ncclComm *comm, zn_defer_fn fn, void *arg);
/* Record an argument error inside a group: ncclGroupEnd then fails and drops the group. */
void zn_group_set_error(ncclResult_t err);

/* Public API visibility: definitions of nccl* functions use ZN_API, which also makes the
 * pnccl* alias NCCL's profiler interposition expects. */
#define ZN_EXPORT __attribute__((visibility("default")))
#define ZN_API(ret, name, ...)                                        \
    ZN_EXPORT ret p##name(__VA_ARGS__) __attribute__((alias(#name))); \
    ZN_EXPORT ret name(__VA_ARGS__)

#endif
