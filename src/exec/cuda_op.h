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
 * capture, so streams are never asked whether they capture; 1 and 2 ask, and the ordering
 * holds within one domain only: eager launches among themselves, the launches captured into
 * one graph among themselves (as edges of the graph). A launch in another domain than the
 * previous one starts afresh: an event cannot tie a graph's later replays to eager work (the
 * application orders those, as with NCCL). graph_order is graphStreamOrdering: 0 leaves the
 * order of captured launches on different streams to the application (no edges added). */
struct zn_cuda_order {
    void *last_stream; /* the stream of the previous launch on this communicator */
    void *last_event;  /* recorded after it: launches on another stream wait for it */
    unsigned long long last_capture, cur_capture; /* capture ids (0: eager) */
    int graph_mode;                               /* config.graphUsageMode */
    int graph_order;                              /* config.graphStreamOrdering */
};

/* Before a launch on stream: wait for the previous launch if it went to another stream. */
ncclResult_t zn_cuda_order(struct zn_cuda_order *o, void *stream);
/* After a launch on stream: remember it. */
ncclResult_t zn_cuda_note(struct zn_cuda_order *o, void *stream);
void zn_cuda_order_fini(struct zn_cuda_order *o);

#endif
