/*
 * What both GPU paths of exec share: the operations a group hands them, and the ordering of a
 * communicator's launches across streams. The direct path (cuda_exec.c) and the staged path
 * (cuda_stage.c) both include this header and neither includes the other's internals.
 */
#ifndef ZN_EXEC_CUDA_OP_H
#define ZN_EXEC_CUDA_OP_H

#include "exec/exec.h"

enum zn_cuda_op_kind { ZN_CUDA_COLL, ZN_CUDA_SEND, ZN_CUDA_RECV };

struct zn_cuda_op {
    enum zn_cuda_op_kind kind;
    struct zn_coll_args a; /* SEND/RECV: sendbuf/recvbuf, count, dtype, peer */
    struct zn_op_desc op;
    const void *scalar_dev; /* PreMulSum with ncclScalarDevice: read by the kernel */
    void *stream;
};

/* Launches of one communicator run in order on the GPU (all ranks must run its kernels in the
 * same order): a launch on another stream than the previous one first waits for it.
 *
 * CUDA graphs (the communicator's config). graph_mode is graphUsageMode: 0 promises no
 * capture, so streams are never asked whether they capture; 1 and 2 ask, and the order is
 * kept within each domain: eager launches among themselves (also across a capture made in
 * between), and the launches captured into one graph among themselves (as edges of the
 * graph). Nothing ties a graph's later replays to eager work: an event recorded outside a
 * capture cannot be waited on inside it (the application orders replays, as with NCCL).
 * graph_order is graphStreamOrdering: 0 adds no edges between captured launches on different
 * streams (the application orders them). */
struct zn_cuda_order {
    void *last_stream;            /* the stream of the previous eager launch */
    void *last_event;             /* recorded after it: eager launches on another stream wait */
    unsigned long long cap_id;    /* the capture of the previous captured launch (0: none) */
    void *cap_stream, *cap_event; /* its stream, and an event recorded in that capture */
    unsigned long long cur;       /* the capture of the launch being made (0: eager) */
    int graph_mode;               /* config.graphUsageMode */
    int graph_order;              /* config.graphStreamOrdering */
};

/* Before a launch on stream: wait for the previous launch if it went to another stream. */
ncclResult_t zn_cuda_order(struct zn_cuda_order *o, void *stream);
/* After a launch on stream: remember it. */
ncclResult_t zn_cuda_note(struct zn_cuda_order *o, void *stream);
void zn_cuda_order_fini(struct zn_cuda_order *o);

#endif
