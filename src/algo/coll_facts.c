/* The table of collective facts (coll_facts.h). */
#include "coll_facts.h"
#include "abi/dev_abi.h"

/* NCCL's documentation of each call says which buffers it reads and writes, and how big they
 * are; the rows say the same in blocks of the count argument. */
static const struct zn_coll_facts facts[ZN_NCOLL_FACTS] = {
    [ZN_COLL_ALLREDUCE] = { .name = "AllReduce",
                            .api = "ncclAllReduce",
                            .reduces = 1,
                            .send = ZN_EXT_BLOCK,
                            .recv = ZN_EXT_BLOCK,
                            .dev_coll = ZN_DEV_ALLREDUCE },
    [ZN_COLL_BROADCAST] = { .name = "Broadcast",
                            .api = "ncclBroadcast",
                            .rooted = 1,
                            .send = ZN_EXT_ROOT_BLOCK,
                            .recv = ZN_EXT_BLOCK,
                            .dev_coll = ZN_DEV_BROADCAST },
    [ZN_COLL_REDUCE] = { .name = "Reduce",
                         .api = "ncclReduce",
                         .reduces = 1,
                         .rooted = 1,
                         .send = ZN_EXT_BLOCK,
                         .recv = ZN_EXT_ROOT_BLOCK,
                         .dev_coll = ZN_DEV_REDUCE },
    [ZN_COLL_ALLGATHER] = { .name = "AllGather",
                            .api = "ncclAllGather",
                            .send = ZN_EXT_BLOCK,
                            .recv = ZN_EXT_BLOCKS,
                            .dev_coll = ZN_DEV_ALLGATHER },
    [ZN_COLL_REDUCESCATTER] = { .name = "ReduceScatter",
                                .api = "ncclReduceScatter",
                                .reduces = 1,
                                .send = ZN_EXT_BLOCKS,
                                .recv = ZN_EXT_BLOCK,
                                .dev_coll = ZN_DEV_REDUCESCATTER },
    [ZN_COLL_ALLTOALL] = { .name = "AlltoAll",
                           .api = "ncclAlltoAll",
                           .send = ZN_EXT_BLOCKS,
                           .recv = ZN_EXT_BLOCKS,
                           .dev_coll = ZN_DEV_ALLTOALL },
    [ZN_COLL_GATHER] = { .name = "Gather",
                         .api = "ncclGather",
                         .rooted = 1,
                         .send = ZN_EXT_BLOCK,
                         .recv = ZN_EXT_ROOT_BLOCKS,
                         .dev_coll = ZN_DEV_GATHER },
    [ZN_COLL_SCATTER] = { .name = "Scatter",
                          .api = "ncclScatter",
                          .rooted = 1,
                          .send = ZN_EXT_ROOT_BLOCKS,
                          .recv = ZN_EXT_BLOCK,
                          .dev_coll = ZN_DEV_SCATTER },
    [ZN_COLL_SEND] = { .name = "Send",
                       .api = "ncclSend",
                       .p2p = 1,
                       .send = ZN_EXT_BLOCK,
                       .recv = ZN_EXT_NONE,
                       .dev_coll = -1 },
    [ZN_COLL_RECV] = { .name = "Recv",
                       .api = "ncclRecv",
                       .p2p = 1,
                       .send = ZN_EXT_NONE,
                       .recv = ZN_EXT_BLOCK,
                       .dev_coll = -1 },
};

static const struct zn_coll_facts unknown = {
    .name = "?", .api = "?", .send = ZN_EXT_NONE, .recv = ZN_EXT_NONE, .dev_coll = -1
};

const struct zn_coll_facts *zn_coll_facts(enum zn_coll c)
{
    return (unsigned)c < ZN_NCOLL_FACTS ? &facts[c] : &unknown;
}

const char *zn_coll_name(enum zn_coll c)
{
    return zn_coll_facts(c)->name;
}
