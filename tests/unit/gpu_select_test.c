/*
 * The GPU algorithm choice (algo/gpu.h) per size, pinned. The expected table was produced by
 * the selection as launch_coll in exec/cuda_exec.c made it before it moved into the algorithm
 * registry, so a difference here is a change of behaviour on the GPU: change the table only
 * together with a measurement that justifies the new choice.
 *
 * Every row: a float call of 8 B to 64 MB (per rank where NCCL counts blocks) with the
 * default ZINC_GPU_CHUNK (4K) and ZINC_GPU_LL_CHUNK (2K); expected "algorithm/channels".
 */
#include "abi/dev_abi.h"
#include "algo/gpu.h"
#include "zt.h"

#include <stdio.h>
#include <string.h>

struct row {
    enum zn_coll coll;
    int nranks, ring_mode, registered, premul, in_place, max_ch;
    const char *force_algo, *force_proto;
    const char *expect;
};

static const size_t sizes[] = { 8,      4096,    65536,   262144,   266240,
                                524288, 1048576, 3145728, 16777216, 67108864 };

static const struct row rows[] = {
    { ZN_COLL_ALLREDUCE, 2, 0, 0, 0, 0, 128, NULL, NULL,
      "oneshot_ll/1 oneshot_ll/2 oneshot_ll/32 oneshot_ll/128 oneshot_ll/128 oneshot_ll/128 "
      "twoshot/128 twoshot/128 twoshot/128 twoshot/128" },
    { ZN_COLL_ALLREDUCE, 2, 0, 0, 0, 0, 128, "ring", NULL,
      "ring_ll/1 ring_ll/2 ring_ll/32 ring_ll/128 ring_ll/128 ring_ll/128 ring/128 ring/128 "
      "ring/128 ring/128" },
    { ZN_COLL_ALLREDUCE, 2, 0, 0, 0, 0, 128, "oneshot", NULL,
      "oneshot_ll/1 oneshot_ll/2 oneshot_ll/32 oneshot_ll/128 oneshot_ll/128 oneshot_ll/128 "
      "oneshot/128 oneshot/128 oneshot/128 oneshot/128" },
    { ZN_COLL_ALLREDUCE, 2, 0, 0, 0, 0, 128, "twoshot", NULL,
      "twoshot/1 twoshot/1 twoshot/8 twoshot/32 twoshot/33 twoshot/64 twoshot/128 twoshot/128 "
      "twoshot/128 twoshot/128" },
    { ZN_COLL_ALLREDUCE, 2, 0, 0, 0, 0, 128, "zerocopy", NULL,
      "oneshot_ll/1 oneshot_ll/2 oneshot_ll/32 oneshot_ll/128 oneshot_ll/128 oneshot_ll/128 "
      "twoshot/128 twoshot/128 twoshot/128 twoshot/128" },
    { ZN_COLL_ALLREDUCE, 2, 0, 1, 0, 0, 128, NULL, NULL,
      "oneshot_ll/1 oneshot_ll/2 oneshot_ll/32 oneshot_ll/128 oneshot_ll/128 oneshot_ll/128 "
      "zerocopy/128 zerocopy/128 zerocopy/128 twoshot/128" },
    { ZN_COLL_ALLREDUCE, 2, 0, 1, 0, 0, 128, "ring", NULL,
      "ring_ll/1 ring_ll/2 ring_ll/32 ring_ll/128 ring_ll/128 ring_ll/128 zerocopy/128 "
      "zerocopy/128 zerocopy/128 ring/128" },
    { ZN_COLL_ALLREDUCE, 2, 0, 1, 0, 0, 128, "oneshot", NULL,
      "oneshot_ll/1 oneshot_ll/2 oneshot_ll/32 oneshot_ll/128 oneshot_ll/128 oneshot_ll/128 "
      "zerocopy/128 zerocopy/128 zerocopy/128 oneshot/128" },
    { ZN_COLL_ALLREDUCE, 2, 0, 1, 0, 0, 128, "twoshot", NULL,
      "twoshot/1 twoshot/1 twoshot/8 twoshot/32 twoshot/33 twoshot/64 zerocopy/128 zerocopy/128 "
      "zerocopy/128 twoshot/128" },
    { ZN_COLL_ALLREDUCE, 2, 0, 1, 0, 0, 128, "zerocopy", NULL,
      "zerocopy/1 zerocopy/1 zerocopy/8 zerocopy/32 zerocopy/33 zerocopy/64 zerocopy/128 "
      "zerocopy/128 zerocopy/128 zerocopy/128" },
    { ZN_COLL_ALLREDUCE, 4, 0, 0, 0, 0, 128, NULL, NULL,
      "oneshot_ll/1 oneshot_ll/2 oneshot_ll/32 oneshot_ll/128 oneshot_ll/128 oneshot_ll/128 "
      "twoshot/64 twoshot/128 twoshot/128 twoshot/128" },
    { ZN_COLL_ALLREDUCE, 4, 0, 0, 0, 0, 128, "ring", NULL,
      "ring_ll/1 ring_ll/2 ring_ll/32 ring_ll/128 ring_ll/128 ring/32 ring/64 ring/128 ring/128 "
      "ring/128" },
    { ZN_COLL_ALLREDUCE, 4, 0, 0, 0, 0, 128, "oneshot", NULL,
      "oneshot_ll/1 oneshot_ll/2 oneshot_ll/32 oneshot_ll/128 oneshot_ll/128 oneshot_ll/128 "
      "oneshot/128 oneshot/128 oneshot/128 oneshot/128" },
    { ZN_COLL_ALLREDUCE, 4, 0, 0, 0, 0, 128, "twoshot", NULL,
      "twoshot/1 twoshot/1 twoshot/4 twoshot/16 twoshot/17 twoshot/32 twoshot/64 twoshot/128 "
      "twoshot/128 twoshot/128" },
    { ZN_COLL_ALLREDUCE, 4, 0, 0, 0, 0, 128, "zerocopy", NULL,
      "oneshot_ll/1 oneshot_ll/2 oneshot_ll/32 oneshot_ll/128 oneshot_ll/128 oneshot_ll/128 "
      "twoshot/64 twoshot/128 twoshot/128 twoshot/128" },
    { ZN_COLL_ALLREDUCE, 4, 0, 1, 0, 0, 128, NULL, NULL,
      "oneshot_ll/1 oneshot_ll/2 oneshot_ll/32 oneshot_ll/128 oneshot_ll/128 oneshot_ll/128 "
      "zerocopy/64 zerocopy/128 zerocopy/128 twoshot/128" },
    { ZN_COLL_ALLREDUCE, 4, 0, 1, 0, 0, 128, "ring", NULL,
      "ring_ll/1 ring_ll/2 ring_ll/32 ring_ll/128 ring_ll/128 ring/32 zerocopy/64 zerocopy/128 "
      "zerocopy/128 ring/128" },
    { ZN_COLL_ALLREDUCE, 4, 0, 1, 0, 0, 128, "oneshot", NULL,
      "oneshot_ll/1 oneshot_ll/2 oneshot_ll/32 oneshot_ll/128 oneshot_ll/128 oneshot_ll/128 "
      "zerocopy/64 zerocopy/128 zerocopy/128 oneshot/128" },
    { ZN_COLL_ALLREDUCE, 4, 0, 1, 0, 0, 128, "twoshot", NULL,
      "twoshot/1 twoshot/1 twoshot/4 twoshot/16 twoshot/17 twoshot/32 zerocopy/64 zerocopy/128 "
      "zerocopy/128 twoshot/128" },
    { ZN_COLL_ALLREDUCE, 4, 0, 1, 0, 0, 128, "zerocopy", NULL,
      "zerocopy/1 zerocopy/1 zerocopy/4 zerocopy/16 zerocopy/17 zerocopy/32 zerocopy/64 "
      "zerocopy/128 zerocopy/128 zerocopy/128" },
    { ZN_COLL_REDUCESCATTER, 2, 0, 0, 0, 0, 128, NULL, NULL,
      "direct_ll/1 direct_ll/2 direct_ll/32 direct_ll/128 direct_ll/128 direct_ll/128 direct/128 "
      "direct/128 split/64 split/64" },
    { ZN_COLL_REDUCESCATTER, 2, 0, 0, 0, 0, 128, "ring", NULL,
      "ring/1 ring/1 ring/16 ring/64 ring/65 ring/128 ring/128 ring/128 ring/128 ring/128" },
    { ZN_COLL_REDUCESCATTER, 2, 0, 0, 0, 0, 128, "oneshot", NULL,
      "direct_ll/1 direct_ll/2 direct_ll/32 direct_ll/128 direct_ll/128 direct_ll/128 direct/128 "
      "direct/128 direct/128 direct/128" },
    { ZN_COLL_REDUCESCATTER, 2, 0, 0, 0, 0, 128, "twoshot", NULL,
      "direct/1 direct/1 direct/16 direct/64 direct/65 direct/128 direct/128 direct/128 direct/128 "
      "direct/128" },
    { ZN_COLL_REDUCESCATTER, 2, 0, 0, 0, 0, 128, "zerocopy", NULL,
      "direct_ll/1 direct_ll/2 direct_ll/32 direct_ll/128 direct_ll/128 direct_ll/128 direct/128 "
      "direct/128 split/64 split/64" },
    { ZN_COLL_REDUCESCATTER, 2, 0, 1, 0, 0, 128, NULL, NULL,
      "direct_ll/1 direct_ll/2 direct_ll/32 direct_ll/128 direct_ll/128 direct_ll/128 direct/128 "
      "zerocopy/128 zerocopy/128 zerocopy/128" },
    { ZN_COLL_REDUCESCATTER, 2, 0, 1, 0, 0, 128, "ring", NULL,
      "ring/1 ring/1 ring/16 ring/64 ring/65 ring/128 ring/128 zerocopy/128 zerocopy/128 "
      "zerocopy/128" },
    { ZN_COLL_REDUCESCATTER, 2, 0, 1, 0, 0, 128, "oneshot", NULL,
      "direct_ll/1 direct_ll/2 direct_ll/32 direct_ll/128 direct_ll/128 direct_ll/128 direct/128 "
      "zerocopy/128 zerocopy/128 zerocopy/128" },
    { ZN_COLL_REDUCESCATTER, 2, 0, 1, 0, 0, 128, "twoshot", NULL,
      "direct/1 direct/1 direct/16 direct/64 direct/65 direct/128 direct/128 zerocopy/128 "
      "zerocopy/128 zerocopy/128" },
    { ZN_COLL_REDUCESCATTER, 2, 0, 1, 0, 0, 128, "zerocopy", NULL,
      "zerocopy/1 zerocopy/1 zerocopy/16 zerocopy/64 zerocopy/65 zerocopy/128 zerocopy/128 "
      "zerocopy/128 zerocopy/128 zerocopy/128" },
    { ZN_COLL_REDUCESCATTER, 4, 0, 0, 0, 0, 128, NULL, NULL,
      "direct_ll/1 direct_ll/2 direct_ll/32 direct_ll/128 direct_ll/128 direct_ll/128 direct/128 "
      "direct/128 split/64 split/64" },
    { ZN_COLL_REDUCESCATTER, 4, 0, 0, 0, 0, 128, "ring", NULL,
      "ring/1 ring/1 ring/16 ring/64 ring/65 ring/128 ring/128 ring/128 ring/128 ring/128" },
    { ZN_COLL_REDUCESCATTER, 4, 0, 0, 0, 0, 128, "oneshot", NULL,
      "direct_ll/1 direct_ll/2 direct_ll/32 direct_ll/128 direct_ll/128 direct_ll/128 direct/128 "
      "direct/128 direct/128 direct/128" },
    { ZN_COLL_REDUCESCATTER, 4, 0, 0, 0, 0, 128, "twoshot", NULL,
      "direct/1 direct/1 direct/16 direct/64 direct/65 direct/128 direct/128 direct/128 direct/128 "
      "direct/128" },
    { ZN_COLL_REDUCESCATTER, 4, 0, 0, 0, 0, 128, "zerocopy", NULL,
      "direct_ll/1 direct_ll/2 direct_ll/32 direct_ll/128 direct_ll/128 direct_ll/128 direct/128 "
      "direct/128 split/64 split/64" },
    { ZN_COLL_REDUCESCATTER, 4, 0, 1, 0, 0, 128, NULL, NULL,
      "direct_ll/1 direct_ll/2 direct_ll/32 direct_ll/128 direct_ll/128 direct_ll/128 direct/128 "
      "zerocopy/128 zerocopy/128 zerocopy/128" },
    { ZN_COLL_REDUCESCATTER, 4, 0, 1, 0, 0, 128, "ring", NULL,
      "ring/1 ring/1 ring/16 ring/64 ring/65 ring/128 ring/128 zerocopy/128 zerocopy/128 "
      "zerocopy/128" },
    { ZN_COLL_REDUCESCATTER, 4, 0, 1, 0, 0, 128, "oneshot", NULL,
      "direct_ll/1 direct_ll/2 direct_ll/32 direct_ll/128 direct_ll/128 direct_ll/128 direct/128 "
      "zerocopy/128 zerocopy/128 zerocopy/128" },
    { ZN_COLL_REDUCESCATTER, 4, 0, 1, 0, 0, 128, "twoshot", NULL,
      "direct/1 direct/1 direct/16 direct/64 direct/65 direct/128 direct/128 zerocopy/128 "
      "zerocopy/128 zerocopy/128" },
    { ZN_COLL_REDUCESCATTER, 4, 0, 1, 0, 0, 128, "zerocopy", NULL,
      "zerocopy/1 zerocopy/1 zerocopy/16 zerocopy/64 zerocopy/65 zerocopy/128 zerocopy/128 "
      "zerocopy/128 zerocopy/128 zerocopy/128" },
    { ZN_COLL_ALLGATHER, 2, 0, 0, 0, 0, 128, NULL, NULL,
      "direct_ll/1 direct_ll/2 direct_ll/32 direct_ll/128 direct_ll/128 direct_ll/128 direct/128 "
      "direct/128 direct/128 direct/128" },
    { ZN_COLL_ALLGATHER, 2, 0, 0, 0, 0, 128, "ring", NULL,
      "ring/1 ring/1 ring/16 ring/64 ring/65 ring/128 ring/128 ring/128 ring/128 ring/128" },
    { ZN_COLL_ALLGATHER, 2, 0, 0, 0, 0, 128, "oneshot", NULL,
      "direct_ll/1 direct_ll/2 direct_ll/32 direct_ll/128 direct_ll/128 direct_ll/128 direct/128 "
      "direct/128 direct/128 direct/128" },
    { ZN_COLL_ALLGATHER, 2, 0, 0, 0, 0, 128, "twoshot", NULL,
      "direct/1 direct/1 direct/16 direct/64 direct/65 direct/128 direct/128 direct/128 direct/128 "
      "direct/128" },
    { ZN_COLL_ALLGATHER, 2, 0, 0, 0, 0, 128, "zerocopy", NULL,
      "direct_ll/1 direct_ll/2 direct_ll/32 direct_ll/128 direct_ll/128 direct_ll/128 direct/128 "
      "direct/128 direct/128 direct/128" },
    { ZN_COLL_ALLGATHER, 2, 0, 1, 0, 0, 128, NULL, NULL,
      "direct_ll/1 direct_ll/2 direct_ll/32 direct_ll/128 direct_ll/128 direct_ll/128 direct/128 "
      "direct/128 direct/128 direct/128" },
    { ZN_COLL_ALLGATHER, 2, 0, 1, 0, 0, 128, "ring", NULL,
      "ring/1 ring/1 ring/16 ring/64 ring/65 ring/128 ring/128 ring/128 ring/128 ring/128" },
    { ZN_COLL_ALLGATHER, 2, 0, 1, 0, 0, 128, "oneshot", NULL,
      "direct_ll/1 direct_ll/2 direct_ll/32 direct_ll/128 direct_ll/128 direct_ll/128 direct/128 "
      "direct/128 direct/128 direct/128" },
    { ZN_COLL_ALLGATHER, 2, 0, 1, 0, 0, 128, "twoshot", NULL,
      "direct/1 direct/1 direct/16 direct/64 direct/65 direct/128 direct/128 direct/128 direct/128 "
      "direct/128" },
    { ZN_COLL_ALLGATHER, 2, 0, 1, 0, 0, 128, "zerocopy", NULL,
      "zerocopy/1 zerocopy/1 zerocopy/16 zerocopy/64 zerocopy/65 zerocopy/128 zerocopy/128 "
      "zerocopy/128 zerocopy/128 zerocopy/128" },
    { ZN_COLL_ALLGATHER, 4, 0, 0, 0, 0, 128, NULL, NULL,
      "direct_ll/1 direct_ll/2 direct_ll/32 direct_ll/128 direct_ll/128 direct_ll/128 direct/128 "
      "direct/128 direct/128 direct/128" },
    { ZN_COLL_ALLGATHER, 4, 0, 0, 0, 0, 128, "ring", NULL,
      "ring/1 ring/1 ring/16 ring/64 ring/65 ring/128 ring/128 ring/128 ring/128 ring/128" },
    { ZN_COLL_ALLGATHER, 4, 0, 0, 0, 0, 128, "oneshot", NULL,
      "direct_ll/1 direct_ll/2 direct_ll/32 direct_ll/128 direct_ll/128 direct_ll/128 direct/128 "
      "direct/128 direct/128 direct/128" },
    { ZN_COLL_ALLGATHER, 4, 0, 0, 0, 0, 128, "twoshot", NULL,
      "direct/1 direct/1 direct/16 direct/64 direct/65 direct/128 direct/128 direct/128 direct/128 "
      "direct/128" },
    { ZN_COLL_ALLGATHER, 4, 0, 0, 0, 0, 128, "zerocopy", NULL,
      "direct_ll/1 direct_ll/2 direct_ll/32 direct_ll/128 direct_ll/128 direct_ll/128 direct/128 "
      "direct/128 direct/128 direct/128" },
    { ZN_COLL_ALLGATHER, 4, 0, 1, 0, 0, 128, NULL, NULL,
      "direct_ll/1 direct_ll/2 direct_ll/32 direct_ll/128 direct_ll/128 direct_ll/128 direct/128 "
      "direct/128 direct/128 direct/128" },
    { ZN_COLL_ALLGATHER, 4, 0, 1, 0, 0, 128, "ring", NULL,
      "ring/1 ring/1 ring/16 ring/64 ring/65 ring/128 ring/128 ring/128 ring/128 ring/128" },
    { ZN_COLL_ALLGATHER, 4, 0, 1, 0, 0, 128, "oneshot", NULL,
      "direct_ll/1 direct_ll/2 direct_ll/32 direct_ll/128 direct_ll/128 direct_ll/128 direct/128 "
      "direct/128 direct/128 direct/128" },
    { ZN_COLL_ALLGATHER, 4, 0, 1, 0, 0, 128, "twoshot", NULL,
      "direct/1 direct/1 direct/16 direct/64 direct/65 direct/128 direct/128 direct/128 direct/128 "
      "direct/128" },
    { ZN_COLL_ALLGATHER, 4, 0, 1, 0, 0, 128, "zerocopy", NULL,
      "zerocopy/1 zerocopy/1 zerocopy/16 zerocopy/64 zerocopy/65 zerocopy/128 zerocopy/128 "
      "zerocopy/128 zerocopy/128 zerocopy/128" },
    { ZN_COLL_BROADCAST, 2, 0, 0, 0, 0, 128, NULL, NULL,
      "direct_ll/1 direct_ll/2 direct_ll/32 direct_ll/128 direct_ll/128 direct_ll/128 direct/128 "
      "direct/128 direct/128 direct/128" },
    { ZN_COLL_BROADCAST, 2, 0, 0, 0, 0, 128, "ring", NULL,
      "ring/1 ring/1 ring/16 ring/64 ring/65 ring/128 ring/128 ring/128 ring/128 ring/128" },
    { ZN_COLL_BROADCAST, 2, 0, 0, 0, 0, 128, "oneshot", NULL,
      "direct_ll/1 direct_ll/2 direct_ll/32 direct_ll/128 direct_ll/128 direct_ll/128 direct/128 "
      "direct/128 direct/128 direct/128" },
    { ZN_COLL_BROADCAST, 2, 0, 0, 0, 0, 128, "twoshot", NULL,
      "direct/1 direct/1 direct/16 direct/64 direct/65 direct/128 direct/128 direct/128 direct/128 "
      "direct/128" },
    { ZN_COLL_BROADCAST, 2, 0, 0, 0, 0, 128, "zerocopy", NULL,
      "direct_ll/1 direct_ll/2 direct_ll/32 direct_ll/128 direct_ll/128 direct_ll/128 direct/128 "
      "direct/128 direct/128 direct/128" },
    { ZN_COLL_BROADCAST, 2, 0, 1, 0, 0, 128, NULL, NULL,
      "direct_ll/1 direct_ll/2 direct_ll/32 direct_ll/128 direct_ll/128 direct_ll/128 direct/128 "
      "direct/128 direct/128 direct/128" },
    { ZN_COLL_BROADCAST, 2, 0, 1, 0, 0, 128, "ring", NULL,
      "ring/1 ring/1 ring/16 ring/64 ring/65 ring/128 ring/128 ring/128 ring/128 ring/128" },
    { ZN_COLL_BROADCAST, 2, 0, 1, 0, 0, 128, "oneshot", NULL,
      "direct_ll/1 direct_ll/2 direct_ll/32 direct_ll/128 direct_ll/128 direct_ll/128 direct/128 "
      "direct/128 direct/128 direct/128" },
    { ZN_COLL_BROADCAST, 2, 0, 1, 0, 0, 128, "twoshot", NULL,
      "direct/1 direct/1 direct/16 direct/64 direct/65 direct/128 direct/128 direct/128 direct/128 "
      "direct/128" },
    { ZN_COLL_BROADCAST, 2, 0, 1, 0, 0, 128, "zerocopy", NULL,
      "zerocopy/1 zerocopy/1 zerocopy/16 zerocopy/64 zerocopy/65 zerocopy/128 zerocopy/128 "
      "zerocopy/128 zerocopy/128 zerocopy/128" },
    { ZN_COLL_BROADCAST, 4, 0, 0, 0, 0, 128, NULL, NULL,
      "direct_ll/1 direct_ll/2 direct_ll/32 direct_ll/128 direct_ll/128 direct_ll/128 direct/128 "
      "direct/128 direct/128 direct/128" },
    { ZN_COLL_BROADCAST, 4, 0, 0, 0, 0, 128, "ring", NULL,
      "ring/1 ring/1 ring/16 ring/64 ring/65 ring/128 ring/128 ring/128 ring/128 ring/128" },
    { ZN_COLL_BROADCAST, 4, 0, 0, 0, 0, 128, "oneshot", NULL,
      "direct_ll/1 direct_ll/2 direct_ll/32 direct_ll/128 direct_ll/128 direct_ll/128 direct/128 "
      "direct/128 direct/128 direct/128" },
    { ZN_COLL_BROADCAST, 4, 0, 0, 0, 0, 128, "twoshot", NULL,
      "direct/1 direct/1 direct/16 direct/64 direct/65 direct/128 direct/128 direct/128 direct/128 "
      "direct/128" },
    { ZN_COLL_BROADCAST, 4, 0, 0, 0, 0, 128, "zerocopy", NULL,
      "direct_ll/1 direct_ll/2 direct_ll/32 direct_ll/128 direct_ll/128 direct_ll/128 direct/128 "
      "direct/128 direct/128 direct/128" },
    { ZN_COLL_BROADCAST, 4, 0, 1, 0, 0, 128, NULL, NULL,
      "direct_ll/1 direct_ll/2 direct_ll/32 direct_ll/128 direct_ll/128 direct_ll/128 direct/128 "
      "direct/128 direct/128 direct/128" },
    { ZN_COLL_BROADCAST, 4, 0, 1, 0, 0, 128, "ring", NULL,
      "ring/1 ring/1 ring/16 ring/64 ring/65 ring/128 ring/128 ring/128 ring/128 ring/128" },
    { ZN_COLL_BROADCAST, 4, 0, 1, 0, 0, 128, "oneshot", NULL,
      "direct_ll/1 direct_ll/2 direct_ll/32 direct_ll/128 direct_ll/128 direct_ll/128 direct/128 "
      "direct/128 direct/128 direct/128" },
    { ZN_COLL_BROADCAST, 4, 0, 1, 0, 0, 128, "twoshot", NULL,
      "direct/1 direct/1 direct/16 direct/64 direct/65 direct/128 direct/128 direct/128 direct/128 "
      "direct/128" },
    { ZN_COLL_BROADCAST, 4, 0, 1, 0, 0, 128, "zerocopy", NULL,
      "zerocopy/1 zerocopy/1 zerocopy/16 zerocopy/64 zerocopy/65 zerocopy/128 zerocopy/128 "
      "zerocopy/128 zerocopy/128 zerocopy/128" },
    { ZN_COLL_ALLREDUCE, 2, 0, 0, 0, 0, 128, NULL, "LL",
      "oneshot_ll/1 oneshot_ll/2 oneshot_ll/32 oneshot_ll/128 oneshot_ll/128 oneshot_ll/128 "
      "oneshot_ll/128 twoshot/128 twoshot/128 twoshot/128" },
    { ZN_COLL_ALLREDUCE, 2, 0, 0, 0, 0, 128, NULL, "SIMPLE",
      "oneshot/1 oneshot/1 oneshot/16 oneshot/64 twoshot/33 twoshot/64 twoshot/128 twoshot/128 "
      "twoshot/128 twoshot/128" },
    { ZN_COLL_ALLREDUCE, 2, 0, 1, 0, 0, 128, NULL, "LL",
      "oneshot_ll/1 oneshot_ll/2 oneshot_ll/32 oneshot_ll/128 oneshot_ll/128 oneshot_ll/128 "
      "oneshot_ll/128 zerocopy/128 zerocopy/128 twoshot/128" },
    { ZN_COLL_ALLREDUCE, 2, 0, 1, 0, 0, 128, NULL, "SIMPLE",
      "zerocopy/1 zerocopy/1 zerocopy/8 zerocopy/32 zerocopy/33 zerocopy/64 zerocopy/128 "
      "zerocopy/128 zerocopy/128 twoshot/128" },
    { ZN_COLL_ALLREDUCE, 4, 0, 0, 0, 0, 128, NULL, "LL",
      "oneshot_ll/1 oneshot_ll/2 oneshot_ll/32 oneshot_ll/128 oneshot_ll/128 oneshot_ll/128 "
      "oneshot_ll/128 twoshot/128 twoshot/128 twoshot/128" },
    { ZN_COLL_ALLREDUCE, 4, 0, 0, 0, 0, 128, NULL, "SIMPLE",
      "oneshot/1 oneshot/1 oneshot/16 oneshot/64 twoshot/17 twoshot/32 twoshot/64 twoshot/128 "
      "twoshot/128 twoshot/128" },
    { ZN_COLL_ALLREDUCE, 4, 0, 1, 0, 0, 128, NULL, "LL",
      "oneshot_ll/1 oneshot_ll/2 oneshot_ll/32 oneshot_ll/128 oneshot_ll/128 oneshot_ll/128 "
      "oneshot_ll/128 zerocopy/128 zerocopy/128 twoshot/128" },
    { ZN_COLL_ALLREDUCE, 4, 0, 1, 0, 0, 128, NULL, "SIMPLE",
      "zerocopy/1 zerocopy/1 zerocopy/4 zerocopy/16 zerocopy/17 zerocopy/32 zerocopy/64 "
      "zerocopy/128 zerocopy/128 twoshot/128" },
    { ZN_COLL_REDUCESCATTER, 2, 0, 0, 0, 0, 128, NULL, "LL",
      "direct_ll/1 direct_ll/2 direct_ll/32 direct_ll/128 direct_ll/128 direct_ll/128 "
      "direct_ll/128 direct/128 split/64 split/64" },
    { ZN_COLL_REDUCESCATTER, 2, 0, 0, 0, 0, 128, NULL, "SIMPLE",
      "direct/1 direct/1 direct/16 direct/64 direct/65 direct/128 direct/128 direct/128 split/64 "
      "split/64" },
    { ZN_COLL_REDUCESCATTER, 2, 0, 1, 0, 0, 128, NULL, "LL",
      "direct_ll/1 direct_ll/2 direct_ll/32 direct_ll/128 direct_ll/128 direct_ll/128 "
      "direct_ll/128 zerocopy/128 zerocopy/128 zerocopy/128" },
    { ZN_COLL_REDUCESCATTER, 2, 0, 1, 0, 0, 128, NULL, "SIMPLE",
      "direct/1 direct/1 direct/16 direct/64 direct/65 direct/128 direct/128 zerocopy/128 "
      "zerocopy/128 zerocopy/128" },
    { ZN_COLL_REDUCESCATTER, 4, 0, 0, 0, 0, 128, NULL, "LL",
      "direct_ll/1 direct_ll/2 direct_ll/32 direct_ll/128 direct_ll/128 direct_ll/128 "
      "direct_ll/128 direct/128 split/64 split/64" },
    { ZN_COLL_REDUCESCATTER, 4, 0, 0, 0, 0, 128, NULL, "SIMPLE",
      "direct/1 direct/1 direct/16 direct/64 direct/65 direct/128 direct/128 direct/128 split/64 "
      "split/64" },
    { ZN_COLL_REDUCESCATTER, 4, 0, 1, 0, 0, 128, NULL, "LL",
      "direct_ll/1 direct_ll/2 direct_ll/32 direct_ll/128 direct_ll/128 direct_ll/128 "
      "direct_ll/128 zerocopy/128 zerocopy/128 zerocopy/128" },
    { ZN_COLL_REDUCESCATTER, 4, 0, 1, 0, 0, 128, NULL, "SIMPLE",
      "direct/1 direct/1 direct/16 direct/64 direct/65 direct/128 direct/128 zerocopy/128 "
      "zerocopy/128 zerocopy/128" },
    { ZN_COLL_ALLGATHER, 2, 0, 0, 0, 0, 128, NULL, "LL",
      "direct_ll/1 direct_ll/2 direct_ll/32 direct_ll/128 direct_ll/128 direct_ll/128 "
      "direct_ll/128 direct/128 direct/128 direct/128" },
    { ZN_COLL_ALLGATHER, 2, 0, 0, 0, 0, 128, NULL, "SIMPLE",
      "direct/1 direct/1 direct/16 direct/64 direct/65 direct/128 direct/128 direct/128 direct/128 "
      "direct/128" },
    { ZN_COLL_ALLGATHER, 2, 0, 1, 0, 0, 128, NULL, "LL",
      "direct_ll/1 direct_ll/2 direct_ll/32 direct_ll/128 direct_ll/128 direct_ll/128 "
      "direct_ll/128 direct/128 direct/128 direct/128" },
    { ZN_COLL_ALLGATHER, 2, 0, 1, 0, 0, 128, NULL, "SIMPLE",
      "direct/1 direct/1 direct/16 direct/64 direct/65 direct/128 direct/128 direct/128 direct/128 "
      "direct/128" },
    { ZN_COLL_ALLGATHER, 4, 0, 0, 0, 0, 128, NULL, "LL",
      "direct_ll/1 direct_ll/2 direct_ll/32 direct_ll/128 direct_ll/128 direct_ll/128 "
      "direct_ll/128 direct/128 direct/128 direct/128" },
    { ZN_COLL_ALLGATHER, 4, 0, 0, 0, 0, 128, NULL, "SIMPLE",
      "direct/1 direct/1 direct/16 direct/64 direct/65 direct/128 direct/128 direct/128 direct/128 "
      "direct/128" },
    { ZN_COLL_ALLGATHER, 4, 0, 1, 0, 0, 128, NULL, "LL",
      "direct_ll/1 direct_ll/2 direct_ll/32 direct_ll/128 direct_ll/128 direct_ll/128 "
      "direct_ll/128 direct/128 direct/128 direct/128" },
    { ZN_COLL_ALLGATHER, 4, 0, 1, 0, 0, 128, NULL, "SIMPLE",
      "direct/1 direct/1 direct/16 direct/64 direct/65 direct/128 direct/128 direct/128 direct/128 "
      "direct/128" },
    { ZN_COLL_BROADCAST, 2, 0, 0, 0, 0, 128, NULL, "LL",
      "direct_ll/1 direct_ll/2 direct_ll/32 direct_ll/128 direct_ll/128 direct_ll/128 "
      "direct_ll/128 direct/128 direct/128 direct/128" },
    { ZN_COLL_BROADCAST, 2, 0, 0, 0, 0, 128, NULL, "SIMPLE",
      "direct/1 direct/1 direct/16 direct/64 direct/65 direct/128 direct/128 direct/128 direct/128 "
      "direct/128" },
    { ZN_COLL_BROADCAST, 2, 0, 1, 0, 0, 128, NULL, "LL",
      "direct_ll/1 direct_ll/2 direct_ll/32 direct_ll/128 direct_ll/128 direct_ll/128 "
      "direct_ll/128 direct/128 direct/128 direct/128" },
    { ZN_COLL_BROADCAST, 2, 0, 1, 0, 0, 128, NULL, "SIMPLE",
      "direct/1 direct/1 direct/16 direct/64 direct/65 direct/128 direct/128 direct/128 direct/128 "
      "direct/128" },
    { ZN_COLL_BROADCAST, 4, 0, 0, 0, 0, 128, NULL, "LL",
      "direct_ll/1 direct_ll/2 direct_ll/32 direct_ll/128 direct_ll/128 direct_ll/128 "
      "direct_ll/128 direct/128 direct/128 direct/128" },
    { ZN_COLL_BROADCAST, 4, 0, 0, 0, 0, 128, NULL, "SIMPLE",
      "direct/1 direct/1 direct/16 direct/64 direct/65 direct/128 direct/128 direct/128 direct/128 "
      "direct/128" },
    { ZN_COLL_BROADCAST, 4, 0, 1, 0, 0, 128, NULL, "LL",
      "direct_ll/1 direct_ll/2 direct_ll/32 direct_ll/128 direct_ll/128 direct_ll/128 "
      "direct_ll/128 direct/128 direct/128 direct/128" },
    { ZN_COLL_BROADCAST, 4, 0, 1, 0, 0, 128, NULL, "SIMPLE",
      "direct/1 direct/1 direct/16 direct/64 direct/65 direct/128 direct/128 direct/128 direct/128 "
      "direct/128" },
    { ZN_COLL_ALLREDUCE, 2, 1, 0, 0, 0, 128, NULL, NULL,
      "ring_ll/1 ring_ll/2 ring_ll/32 ring_ll/128 ring_ll/128 ring_ll/128 ring/128 ring/128 "
      "ring/128 ring/128" },
    { ZN_COLL_ALLREDUCE, 2, 1, 0, 0, 0, 128, NULL, "SIMPLE",
      "ring/1 ring/1 ring/8 ring/32 ring/33 ring/64 ring/128 ring/128 ring/128 ring/128" },
    { ZN_COLL_ALLREDUCE, 2, 1, 0, 0, 0, 128, "oneshot", NULL,
      "ring_ll/1 ring_ll/2 ring_ll/32 ring_ll/128 ring_ll/128 ring_ll/128 ring/128 ring/128 "
      "ring/128 ring/128" },
    { ZN_COLL_ALLREDUCE, 4, 1, 0, 0, 0, 128, NULL, NULL,
      "ring_ll/1 ring_ll/2 ring_ll/32 ring_ll/128 ring_ll/128 ring/32 ring/64 ring/128 ring/128 "
      "ring/128" },
    { ZN_COLL_ALLREDUCE, 4, 1, 0, 0, 0, 128, NULL, "SIMPLE",
      "ring/1 ring/1 ring/4 ring/16 ring/17 ring/32 ring/64 ring/128 ring/128 ring/128" },
    { ZN_COLL_ALLREDUCE, 4, 1, 0, 0, 0, 128, "oneshot", NULL,
      "ring_ll/1 ring_ll/2 ring_ll/32 ring_ll/128 ring_ll/128 ring/32 ring/64 ring/128 ring/128 "
      "ring/128" },
    { ZN_COLL_REDUCESCATTER, 2, 1, 0, 0, 0, 128, NULL, NULL,
      "ring/1 ring/1 ring/16 ring/64 ring/65 ring/128 ring/128 ring/128 ring/128 ring/128" },
    { ZN_COLL_REDUCESCATTER, 2, 1, 0, 0, 0, 128, NULL, "SIMPLE",
      "ring/1 ring/1 ring/16 ring/64 ring/65 ring/128 ring/128 ring/128 ring/128 ring/128" },
    { ZN_COLL_REDUCESCATTER, 2, 1, 0, 0, 0, 128, "oneshot", NULL,
      "ring/1 ring/1 ring/16 ring/64 ring/65 ring/128 ring/128 ring/128 ring/128 ring/128" },
    { ZN_COLL_REDUCESCATTER, 4, 1, 0, 0, 0, 128, NULL, NULL,
      "ring/1 ring/1 ring/16 ring/64 ring/65 ring/128 ring/128 ring/128 ring/128 ring/128" },
    { ZN_COLL_REDUCESCATTER, 4, 1, 0, 0, 0, 128, NULL, "SIMPLE",
      "ring/1 ring/1 ring/16 ring/64 ring/65 ring/128 ring/128 ring/128 ring/128 ring/128" },
    { ZN_COLL_REDUCESCATTER, 4, 1, 0, 0, 0, 128, "oneshot", NULL,
      "ring/1 ring/1 ring/16 ring/64 ring/65 ring/128 ring/128 ring/128 ring/128 ring/128" },
    { ZN_COLL_ALLGATHER, 2, 1, 0, 0, 0, 128, NULL, NULL,
      "ring/1 ring/1 ring/16 ring/64 ring/65 ring/128 ring/128 ring/128 ring/128 ring/128" },
    { ZN_COLL_ALLGATHER, 2, 1, 0, 0, 0, 128, NULL, "SIMPLE",
      "ring/1 ring/1 ring/16 ring/64 ring/65 ring/128 ring/128 ring/128 ring/128 ring/128" },
    { ZN_COLL_ALLGATHER, 2, 1, 0, 0, 0, 128, "oneshot", NULL,
      "ring/1 ring/1 ring/16 ring/64 ring/65 ring/128 ring/128 ring/128 ring/128 ring/128" },
    { ZN_COLL_ALLGATHER, 4, 1, 0, 0, 0, 128, NULL, NULL,
      "ring/1 ring/1 ring/16 ring/64 ring/65 ring/128 ring/128 ring/128 ring/128 ring/128" },
    { ZN_COLL_ALLGATHER, 4, 1, 0, 0, 0, 128, NULL, "SIMPLE",
      "ring/1 ring/1 ring/16 ring/64 ring/65 ring/128 ring/128 ring/128 ring/128 ring/128" },
    { ZN_COLL_ALLGATHER, 4, 1, 0, 0, 0, 128, "oneshot", NULL,
      "ring/1 ring/1 ring/16 ring/64 ring/65 ring/128 ring/128 ring/128 ring/128 ring/128" },
    { ZN_COLL_BROADCAST, 2, 1, 0, 0, 0, 128, NULL, NULL,
      "ring/1 ring/1 ring/16 ring/64 ring/65 ring/128 ring/128 ring/128 ring/128 ring/128" },
    { ZN_COLL_BROADCAST, 2, 1, 0, 0, 0, 128, NULL, "SIMPLE",
      "ring/1 ring/1 ring/16 ring/64 ring/65 ring/128 ring/128 ring/128 ring/128 ring/128" },
    { ZN_COLL_BROADCAST, 2, 1, 0, 0, 0, 128, "oneshot", NULL,
      "ring/1 ring/1 ring/16 ring/64 ring/65 ring/128 ring/128 ring/128 ring/128 ring/128" },
    { ZN_COLL_BROADCAST, 4, 1, 0, 0, 0, 128, NULL, NULL,
      "ring/1 ring/1 ring/16 ring/64 ring/65 ring/128 ring/128 ring/128 ring/128 ring/128" },
    { ZN_COLL_BROADCAST, 4, 1, 0, 0, 0, 128, NULL, "SIMPLE",
      "ring/1 ring/1 ring/16 ring/64 ring/65 ring/128 ring/128 ring/128 ring/128 ring/128" },
    { ZN_COLL_BROADCAST, 4, 1, 0, 0, 0, 128, "oneshot", NULL,
      "ring/1 ring/1 ring/16 ring/64 ring/65 ring/128 ring/128 ring/128 ring/128 ring/128" },
    { ZN_COLL_ALLREDUCE, 2, 0, 1, 1, 0, 128, NULL, NULL,
      "oneshot_ll/1 oneshot_ll/2 oneshot_ll/32 oneshot_ll/128 oneshot_ll/128 oneshot_ll/128 "
      "twoshot/128 twoshot/128 twoshot/128 twoshot/128" },
    { ZN_COLL_REDUCESCATTER, 2, 0, 1, 1, 0, 128, NULL, NULL,
      "direct_ll/1 direct_ll/2 direct_ll/32 direct_ll/128 direct_ll/128 direct_ll/128 direct/128 "
      "direct/128 split/64 split/64" },
    { ZN_COLL_ALLTOALL, 2, 0, 1, 0, 0, 128, "zerocopy", NULL,
      "zerocopy/1 zerocopy/1 zerocopy/16 zerocopy/64 zerocopy/65 zerocopy/128 zerocopy/128 "
      "zerocopy/128 zerocopy/128 zerocopy/128" },
    { ZN_COLL_ALLTOALL, 2, 0, 1, 0, 1, 128, "zerocopy", NULL,
      "direct_ll/1 direct_ll/2 direct_ll/32 direct_ll/128 direct_ll/128 direct_ll/128 direct/128 "
      "direct/128 direct/128 direct/128" },
    { ZN_COLL_ALLTOALL, 4, 0, 0, 0, 0, 128, NULL, NULL,
      "direct_ll/1 direct_ll/2 direct_ll/32 direct_ll/128 direct_ll/128 direct_ll/128 direct/128 "
      "direct/128 direct/128 direct/128" },
    { ZN_COLL_ALLREDUCE, 1, 0, 1, 0, 0, 128, NULL, NULL,
      "oneshot_ll/1 oneshot_ll/2 oneshot_ll/32 oneshot_ll/128 oneshot_ll/128 oneshot_ll/128 "
      "twoshot/128 twoshot/128 twoshot/128 twoshot/128" },
    { ZN_COLL_ALLREDUCE, 1, 1, 0, 0, 0, 128, "ring", NULL,
      "oneshot_ll/1 oneshot_ll/2 oneshot_ll/32 oneshot_ll/128 oneshot_ll/128 oneshot_ll/128 "
      "twoshot/128 twoshot/128 twoshot/128 twoshot/128" },
    { ZN_COLL_ALLREDUCE, 8, 0, 0, 0, 0, 8, NULL, NULL,
      "oneshot_ll/1 oneshot_ll/2 oneshot_ll/8 oneshot/8 twoshot/8 twoshot/8 twoshot/8 twoshot/8 "
      "twoshot/8 twoshot/8" },
    { ZN_COLL_ALLREDUCE, 8, 1, 0, 0, 0, 8, NULL, NULL,
      "ring_ll/1 ring_ll/4 ring/2 ring/8 ring/8 ring/8 ring/8 ring/8 ring/8 ring/8" },
    { ZN_COLL_ALLREDUCE, 8, 0, 0, 0, 0, 8, NULL, "LL",
      "oneshot_ll/1 oneshot_ll/2 oneshot_ll/8 oneshot/8 twoshot/8 twoshot/8 twoshot/8 twoshot/8 "
      "twoshot/8 twoshot/8" },
    { ZN_COLL_ALLREDUCE, 3, 0, 0, 0, 0, 128, "ring", "LL",
      "ring_ll/1 ring_ll/2 ring_ll/32 ring_ll/128 ring_ll/128 ring_ll/128 ring/86 ring/128 "
      "ring/128 ring/128" },
    { ZN_COLL_REDUCE, 4, 0, 0, 0, 0, 128, NULL, NULL,
      "direct_ll/1 direct_ll/2 direct_ll/32 direct_ll/128 direct_ll/128 direct_ll/128 direct/128 "
      "direct/128 direct/128 direct/128" },
    { ZN_COLL_SCATTER, 4, 0, 1, 0, 0, 128, "zerocopy", NULL,
      "zerocopy/1 zerocopy/1 zerocopy/16 zerocopy/64 zerocopy/65 zerocopy/128 zerocopy/128 "
      "zerocopy/128 zerocopy/128 zerocopy/128" },
};

/* The choices for one row, in the table's format; net: some ring neighbours are net shadows
 * (GPUs on several hosts); all_fifos: every peer's FIFO is there as well. */
static void choose_row(const struct row *r, int net, int all_fifos, char *out, size_t len)
{
    size_t used = 0;
    out[0] = 0;
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        struct zn_gpu_call c = { .coll = r->coll,
                                 .bytes = sizes[i],
                                 .count = sizes[i] / 4,
                                 .esize = 4,
                                 .nranks = r->nranks,
                                 .ring_mode = r->ring_mode,
                                 .all_fifos = all_fifos,
                                 .net = net,
                                 .premul = r->premul,
                                 .in_place = r->in_place,
                                 .registered = r->registered,
                                 .max_ch = r->max_ch,
                                 .chunk = 4096,
                                 .ll_chunk = 2048,
                                 .force_algo = r->force_algo,
                                 .force_proto = r->force_proto };
        int nch = 0;
        const struct zn_gpu_algo *g = zn_gpu_algo_select(&c, &nch);
        used += (size_t)snprintf(out + used, len - used, "%s%s/%d", i ? " " : "",
                                 g ? g->name : "none", nch);
    }
}

ZT_TEST(choice_per_size_is_pinned)
{
    int bad = 0;
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        char got[512];
        choose_row(&rows[i], 0, 0, got, sizeof(got));
        if (strcmp(got, rows[i].expect) != 0) {
            fprintf(stderr,
                    "row %zu (%s n=%d ring=%d reg=%d algo=%s proto=%s):\n  want %s\n  got  %s\n", i,
                    zn_coll_name(rows[i].coll), rows[i].nranks, rows[i].ring_mode,
                    rows[i].registered, rows[i].force_algo ? rows[i].force_algo : "-",
                    rows[i].force_proto ? rows[i].force_proto : "-", rows[i].expect, got);
            bad++;
        }
    }
    ZT_EQ_INT(bad, 0);
}

/* The registry's entries are complete and name what they run. */
ZT_TEST(registry_is_complete)
{
    int n = 0;
    const struct zn_gpu_algo *const *list = zn_gpu_algo_list(&n);
    ZT_ASSERT(n >= 8);
    for (int i = 0; i < n; i++) {
        const struct zn_gpu_algo *g = list[i];
        ZT_ASSERT(g->name && g->label && g->doc && g->force[0]);
        ZT_ASSERT(g->supports && g->cost && g->channels);
        for (int j = 0; j < i; j++) ZT_ASSERT(strcmp(list[j]->name, g->name) != 0);
    }
}

/* Ring mode keeps exactly the collectives that have ring kernels on the GPU. */
ZT_TEST(ring_mode_collectives)
{
    static const int on_gpu[ZN_NCOLLS] = {
        [ZN_COLL_ALLREDUCE] = 1, [ZN_COLL_BROADCAST] = 1,     [ZN_COLL_REDUCE] = 1,
        [ZN_COLL_ALLGATHER] = 1, [ZN_COLL_REDUCESCATTER] = 1,
    };
    for (int c = 0; c < ZN_NCOLLS; c++) ZT_EQ_INT(zn_gpu_ring_on_gpu((enum zn_coll)c), on_gpu[c]);
    /* ZINC_ALGO=ring never gives a collective without ring kernels the ring pattern (it would
     * run it as an allgather). */
    for (int c = 0; c < ZN_NCOLLS; c++) {
        if (on_gpu[c]) continue;
        struct row r = {
            .coll = (enum zn_coll)c, .nranks = 4, .max_ch = 128, .force_algo = "ring"
        };
        char got[512];
        choose_row(&r, 0, 0, got, sizeof(got));
        ZT_ASSERT(strstr(got, "ring") == NULL);
    }
}

/* Across hosts (net shadows among the neighbours' arenas) every ring collective takes the FIFO
 * ring at every size, whatever is forced: LL packets cannot cross a net shadow. The same calls
 * without the net take ring LL for small allreduces (the direct patterns forced are not there
 * in ring mode, so the cheapest is taken). */
ZT_TEST(net_ring_is_fifo_only)
{
    static const char *const force[] = { NULL, "ring", "oneshot", "twoshot", "zerocopy" };
    /* 16 ranks: a ring across hosts beyond ZN_DEV_MAX_RANKS (peers by slot), where nothing but
     * the FIFO ring can run, with or without a net. */
    static const int nranks[] = { 4, 16 };
    for (size_t k = 0; k < sizeof(nranks) / sizeof(nranks[0]); k++) {
        for (int c = 0; c < ZN_NCOLLS; c++) {
            if (!zn_gpu_ring_on_gpu((enum zn_coll)c)) continue;
            for (size_t f = 0; f < sizeof(force) / sizeof(force[0]); f++) {
                struct row r = { .coll = (enum zn_coll)c,
                                 .nranks = nranks[k],
                                 .ring_mode = 1,
                                 .max_ch = 2,
                                 .force_algo = force[f],
                                 .expect = NULL };
                char got[512];
                choose_row(&r, 1, 0, got, sizeof(got));
                for (char *w = strtok(got, " "); w; w = strtok(NULL, " "))
                    ZT_ASSERT(!strcmp(w, "ring/1") || !strcmp(w, "ring/2"));
                choose_row(&r, 0, 0, got, sizeof(got));
                int ll = c == ZN_COLL_ALLREDUCE && nranks[k] <= ZN_DEV_MAX_RANKS;
                ZT_ASSERT((strstr(got, "ring_ll/") != NULL) == ll);
                if (nranks[k] > ZN_DEV_MAX_RANKS)
                    for (char *w = strtok(got, " "); w; w = strtok(NULL, " "))
                        ZT_ASSERT(!strncmp(w, "ring/", 5));
            }
        }
    }
}

/* Across hosts with every peer's FIFO there (all_fifos): the ring collectives keep the FIFO
 * ring (the direct FIFO pattern where ZINC_ALGO forces it; for allreduce the one-shot FIFO
 * pattern, which is also the default up to 32 KB: one net hop), alltoall, gather and scatter
 * take the direct FIFO pattern at every size whatever is forced (no LL packets, no zero-copy
 * through a net shadow), and without all_fifos ring mode has no pattern for them (exec stages
 * them) and allreduce only the ring. */
ZT_TEST(net_all_fifos_is_fifo_only)
{
    static const char *const force[] = { NULL, "ring", "oneshot", "twoshot", "zerocopy" };
    static const char *const proto[] = { NULL, "LL", "SIMPLE" };
    for (int c = 0; c < ZN_NCOLLS; c++) {
        int ring = zn_gpu_ring_on_gpu((enum zn_coll)c);
        for (size_t f = 0; f < sizeof(force) / sizeof(force[0]); f++) {
            for (size_t p = 0; p < sizeof(proto) / sizeof(proto[0]); p++) {
                for (int reg = 0; reg < 2; reg++) {
                    struct row r = { .coll = (enum zn_coll)c,
                                     .nranks = 4,
                                     .ring_mode = 1,
                                     .registered = reg,
                                     .max_ch = 2,
                                     .force_algo = force[f],
                                     .force_proto = proto[p],
                                     .expect = NULL };
                    char got[512];
                    choose_row(&r, 1, 1, got, sizeof(got));
                    int ar = c == ZN_COLL_ALLREDUCE;
                    int direct_forced =
                        !ar && force[f] &&
                        (!strcmp(force[f], "oneshot") || !strcmp(force[f], "twoshot"));
                    int oneshot_forced = ar && force[f] && !strcmp(force[f], "oneshot");
                    int ring_forced = force[f] && !strcmp(force[f], "ring");
                    size_t i = 0;
                    for (char *w = strtok(got, " "); w; w = strtok(NULL, " "), i++) {
                        int oneshot = ar && (oneshot_forced || (!ring_forced && sizes[i] <= 32768));
                        const char *want = oneshot                  ? "oneshot/"
                                           : ring && !direct_forced ? "ring/"
                                                                    : "direct/";
                        ZT_ASSERT(!strncmp(w, want, strlen(want)) && w[strlen(want)] >= '1' &&
                                  w[strlen(want)] <= '2' && !w[strlen(want) + 1]);
                    }
                    choose_row(&r, 1, 0, got, sizeof(got));
                    for (char *w = strtok(got, " "); w; w = strtok(NULL, " "))
                        ZT_ASSERT(!strncmp(w, ring ? "ring/" : "none/", 5));
                }
            }
        }
    }
}

ZT_MAIN(ZT_CASE(choice_per_size_is_pinned), ZT_CASE(registry_is_complete),
        ZT_CASE(ring_mode_collectives), ZT_CASE(net_ring_is_fifo_only),
        ZT_CASE(net_all_fifos_is_fifo_only))
