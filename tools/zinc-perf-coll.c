/*
 * zinc-perf: the collective table. Each row says how big the buffers are for a size, how the
 * bandwidth is computed, how to issue the call and where each output element comes from;
 * the sweep, fill and check code is the same for all of them.
 *
 * Sizes, in-place layouts and bandwidth follow nccl-tests (2.28 era, src/<coll>.cu):
 *   - the size of a row is the larger of the send and receive buffers, in bytes;
 *   - collectives whose buffers are cut into nranks blocks round each block down to a
 *     multiple of 16 bytes, so small sizes run with count 0;
 *   - algbw = bytes / time, where bytes is count * typesize, times nranks for the split
 *     collectives; busbw = algbw * 2(n-1)/n for allreduce, (n-1)/n for allgather,
 *     reducescatter, alltoall, gather and scatter, and 1 for broadcast, reduce and sendrecv
 *     (the list's bus column).
 * The buffer sizes and in-place layouts come from the collective facts, the rows from the
 * collective list (abi/coll_list.h); what is here per benchmark is how to call it and where
 * each output element comes from.
 */
#include <ctype.h>
#include <string.h>

#include "zinc-perf.h"

/* Leaves the current run function on failure, naming the call for the caller's message.
 * ncclInProgress is not a failure: completion is waited for through ncclCommGetAsyncError. */
#define TRY(call)                                        \
    do {                                                 \
        ncclResult_t r_ = (call);                        \
        if (r_ != ncclSuccess && r_ != ncclInProgress) { \
            *fn = #call;                                 \
            return r_;                                   \
        }                                                \
    } while (0)

static ncclResult_t run_all_reduce(const struct zp_call *c, const char **fn)
{
    TRY(ncclAllReduce(c->send, c->recv, c->count, c->type, c->op, c->comm, c->stream));
    return ncclSuccess;
}

static ncclResult_t run_all_gather(const struct zp_call *c, const char **fn)
{
    TRY(ncclAllGather(c->send, c->recv, c->count, c->type, c->comm, c->stream));
    return ncclSuccess;
}

static ncclResult_t run_reduce_scatter(const struct zp_call *c, const char **fn)
{
    TRY(ncclReduceScatter(c->send, c->recv, c->count, c->type, c->op, c->comm, c->stream));
    return ncclSuccess;
}

static ncclResult_t run_broadcast(const struct zp_call *c, const char **fn)
{
    TRY(ncclBroadcast(c->send, c->recv, c->count, c->type, c->root, c->comm, c->stream));
    return ncclSuccess;
}

static ncclResult_t run_reduce(const struct zp_call *c, const char **fn)
{
    TRY(ncclReduce(c->send, c->recv, c->count, c->type, c->op, c->root, c->comm, c->stream));
    return ncclSuccess;
}

static ncclResult_t run_alltoall(const struct zp_call *c, const char **fn)
{
    TRY(ncclAlltoAll(c->send, c->recv, c->count, c->type, c->comm, c->stream));
    return ncclSuccess;
}

static ncclResult_t run_gather(const struct zp_call *c, const char **fn)
{
    TRY(ncclGather(c->send, c->recv, c->count, c->type, c->root, c->comm, c->stream));
    return ncclSuccess;
}

static ncclResult_t run_scatter(const struct zp_call *c, const char **fn)
{
    TRY(ncclScatter(c->send, c->recv, c->count, c->type, c->root, c->comm, c->stream));
    return ncclSuccess;
}

/* A ring shift: send to the next rank, receive from the previous one, in one group so that
 * both progress together (nccl-tests' sendrecv). */
static ncclResult_t run_sendrecv(const struct zp_call *c, const char **fn)
{
    int next = (c->rank + 1) % c->nranks, prev = (c->rank - 1 + c->nranks) % c->nranks;
    TRY(ncclGroupStart());
    TRY(ncclSend(c->send, c->count, c->type, next, c->comm, c->stream));
    TRY(ncclRecv(c->recv, c->count, c->type, prev, c->comm, c->stream));
    TRY(ncclGroupEnd());
    return ncclSuccess;
}

static enum zp_src src_all_reduce(int rank, int n, int root, size_t count, size_t p, int *sr,
                                  size_t *si)
{
    *si = p;
    return ZP_SRC_REDUCE;
}

static enum zp_src src_all_gather(int rank, int n, int root, size_t count, size_t p, int *sr,
                                  size_t *si)
{
    *sr = (int)(p / count);
    *si = p % count;
    return ZP_SRC_COPY;
}

static enum zp_src src_reduce_scatter(int rank, int n, int root, size_t count, size_t p, int *sr,
                                      size_t *si)
{
    *si = (size_t)rank * count + p;
    return ZP_SRC_REDUCE;
}

static enum zp_src src_broadcast(int rank, int n, int root, size_t count, size_t p, int *sr,
                                 size_t *si)
{
    *sr = root;
    *si = p;
    return ZP_SRC_COPY;
}

/* The receive buffer of a non-root rank is not the library's to write. */
static enum zp_src src_reduce(int rank, int n, int root, size_t count, size_t p, int *sr,
                              size_t *si)
{
    *si = p;
    return rank == root ? ZP_SRC_REDUCE : ZP_SRC_KEEP;
}

static enum zp_src src_alltoall(int rank, int n, int root, size_t count, size_t p, int *sr,
                                size_t *si)
{
    *sr = (int)(p / count);
    *si = (size_t)rank * count + p % count;
    return ZP_SRC_COPY;
}

static enum zp_src src_gather(int rank, int n, int root, size_t count, size_t p, int *sr,
                              size_t *si)
{
    *sr = (int)(p / count);
    *si = p % count;
    return rank == root ? ZP_SRC_COPY : ZP_SRC_KEEP;
}

static enum zp_src src_scatter(int rank, int n, int root, size_t count, size_t p, int *sr,
                               size_t *si)
{
    *sr = root;
    *si = (size_t)rank * count + p;
    return ZP_SRC_COPY;
}

static enum zp_src src_sendrecv(int rank, int n, int root, size_t count, size_t p, int *sr,
                                size_t *si)
{
    *sr = (rank - 1 + n) % n;
    *si = p;
    return ZP_SRC_COPY;
}

/* The list's rows without a benchmark of their own (bench none: ncclRecv, which sendrecv runs
 * with ncclSend) get no functions, and zp_coll_find never returns them. */
#define run_none NULL
#define src_none NULL

/* A row per row of the collective list (abi/coll_list.h), at its enum zn_coll: nccl-tests' name,
 * the bus bandwidth factor, and this file's functions named after the benchmark. A
 * point-to-point row's benchmark sends with the send row and receives with the receive row. */
#define ZP_ROW(id, name_, api, bench, red, root, send, recv, kernel, ring, sr, zc, bus_)           \
    [ZN_COLL_##id] = { .name = #bench,                                                             \
                       .send_side = ZN_KERN_##kernel == ZN_KERN_P2P ? ZN_COLL_SEND : ZN_COLL_##id, \
                       .recv_side = ZN_KERN_##kernel == ZN_KERN_P2P ? ZN_COLL_RECV : ZN_COLL_##id, \
                       .bus = ZP_BUS_##bus_,                                                       \
                       .run = run_##bench,                                                         \
                       .source = src_##bench },
const struct zp_coll zp_colls[] = { ZN_COLL_LIST(ZP_ROW) };
#undef ZP_ROW
const int zp_ncolls = sizeof(zp_colls) / sizeof(zp_colls[0]);

/* Lower case without underscores and without a trailing "_perf": "AllReduce", "all_reduce"
 * and "all_reduce_perf" all become "allreduce". */
static void squash(const char *in, char *out, size_t len)
{
    size_t n = 0, l = strlen(in);
    if (l > 5 && strcmp(in + l - 5, "_perf") == 0) l -= 5;
    for (size_t i = 0; i < l && n + 1 < len; i++)
        if (in[i] != '_') out[n++] = (char)tolower((unsigned char)in[i]);
    out[n] = '\0';
}

const struct zp_coll *zp_coll_find(const char *name)
{
    char want[64], have[64];
    squash(name, want, sizeof(want));
    for (int i = 0; i < zp_ncolls; i++) {
        if (!zp_colls[i].run) continue;
        squash(zp_colls[i].name, have, sizeof(have));
        if (strcmp(want, have) == 0) return &zp_colls[i];
    }
    return NULL;
}

int zp_coll_has_op(const struct zp_coll *c)
{
    return zn_coll_facts(c->send_side)->reduces;
}

int zp_coll_has_root(const struct zp_coll *c)
{
    return zn_coll_facts(c->send_side)->rooted;
}

/* nccl-tests leaves the in-place result unchecked where a block is both sent and overwritten:
 * alltoall (its blocks overlap in place) and sendrecv (one buffer sent and received into). */
int zp_coll_ip_checked(const struct zp_coll *c)
{
    return !zn_coll_facts(c->send_side)->p2p && !zn_coll_in_place_overlaps(c->send_side);
}

/* count is cut into nranks blocks where a buffer holds a block per rank. */
static int split(const struct zp_coll *c)
{
    return zn_coll_extent_per_rank(zn_coll_facts(c->send_side)->send) ||
           zn_coll_extent_per_rank(zn_coll_facts(c->recv_side)->recv);
}

/* Buffers are sized alike on every rank (nccl-tests allocates the root's sizes everywhere). */
void zp_sizes_get(const struct zp_coll *c, size_t bytes, int typesize, int nranks,
                  struct zp_sizes *sz)
{
    size_t count = bytes / (size_t)typesize, n = (size_t)nranks;
    size_t block = split(c) ? (count / n) & ~(size_t)(16 / typesize - 1) : count;
    int ip = zn_coll_in_place_offset(c->send_side);
    sz->count = block;
    sz->sendcount = block * (size_t)zn_coll_send_blocks(c->send_side, nranks);
    sz->recvcount = block * (size_t)zn_coll_recv_blocks(c->recv_side, nranks);
    sz->send_ip = ip > 0 ? block : 0;
    sz->recv_ip = ip < 0 ? block : 0;
}

void zp_bandwidth(const struct zp_coll *c, const struct zp_sizes *sz, int typesize, int nranks,
                  double sec, double *algbw, double *busbw)
{
    double bytes = (double)sz->count * typesize * (split(c) ? nranks : 1);
    double factor = 1;
    if (c->bus == ZP_BUS_RING) factor = (double)(nranks - 1) / nranks;
    if (c->bus == ZP_BUS_ALLREDUCE) factor = 2.0 * (nranks - 1) / nranks;
    *algbw = bytes / 1.0e9 / sec;
    *busbw = *algbw * factor;
}
