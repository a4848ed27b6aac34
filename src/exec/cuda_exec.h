/*
 * The CUDA executor: launches the kernels of a group on the users' streams. Nothing waits on
 * the host; calls return once their kernels are enqueued, and they can be captured in graphs
 * (see abi/dev_abi.h for why replays stay consistent).
 */
#ifndef ZN_EXEC_CUDA_EXEC_H
#define ZN_EXEC_CUDA_EXEC_H

#include "algo/algo.h"
#include "abi/dev_abi.h"
#include "exec/cuda_op.h"
#include "exec/exec.h"
#include "transport/reg.h"

struct zn_stage;
struct zn_gpunet;

/* The executor's view of a cuda communicator. */
struct zn_cuda_ctx {
    struct zn_stage *stage; /* staged path (exec/cuda_stage.h): all operations, or in
                               ring mode those the ring kernels do not do; else NULL */
    int ring;               /* ring mode: only the ring neighbours' arenas are mapped */
    /* net: the communicator's FIFOs cross hosts through the GPU net engine; the same on every
     * rank, also where this rank's own neighbours are all local (dev.net_mask says which of
     * its peers are net shadows) */
    int net;
    int all_fifos;                 /* ring mode across hosts where every peer's FIFO is there
                                      (mapped, or a net shadow): send/recv, alltoall, gather and
                                      scatter run as kernels, not staged */
    struct zn_gpunet *gnet;        /* FIFOs between hosts (proxy/gpu_net_engine.h), or NULL */
    struct zn_dev_comm dev;        /* what kernels get */
    int cuda_dev;                  /* device ordinal in this process */
    volatile uint32_t *error_host; /* host view of dev.error */
    int max_ch;                    /* channels the arena has (ZINC_GPU_CHANNELS) */
    int p2p_ch;                    /* most channels of one send/recv (ZINC_GPU_P2P_CHANNELS) */
    size_t p2p_ll;                 /* send/recv up to this many bytes as LL (ZINC_GPU_P2P_LL) */
    int max_peers;                 /* config.maxP2pPeers: send/recv in waves (0: one kernel) */
    size_t ll_chunk;               /* LL allreduce bytes per channel (ZINC_GPU_LL_CHUNK) */
    size_t chunk;                  /* other kernels' bytes per channel (ZINC_GPU_CHUNK) */
    struct zn_cuda_order order;    /* launches in order across streams */
    const char *force_algo;
    const char *force_proto; /* ZINC_PROTO: LL or SIMPLE */
    /* Buffers registered with ncclCommRegister whose allocations every peer has mapped
     * (owned by the p2p transport; NULL without it): calls whose buffers all lie in them can
     * skip the FIFOs (zero-copy). */
    const struct zn_reg_table *regs;
};

/* Launch every operation of one communicator's share of a group: collectives in call order,
 * then all sends and receives in one fused kernel (or, staged, in one proxy operation). */
ncclResult_t zn_cuda_launch(struct zn_cuda_ctx *cuda, struct zn_cuda_op *ops, int n);

/* A kernel of this communicator gave up (peer gone, deadline, abort): the reason, or NULL. */
const char *zn_cuda_failure(const struct zn_cuda_ctx *cuda);

void zn_cuda_ctx_fini(struct zn_cuda_ctx *cuda);

#endif
