/*
 * The table of collective facts (algo/coll_facts.h) against NCCL's documentation of each call
 * (the NCCL user guide, "Collective Operations" and the ncclAllReduce ... ncclRecv reference):
 * which buffers each rank passes and how many elements they hold, in-place layouts, and where
 * each block of a copying collective comes from. The reference below is written from those
 * pages, one function per call, and shares nothing with the table but the enum.
 */
#include "abi/dev_abi.h"
#include "algo/coll_facts.h"
#include "zt.h"

#include <string.h>

/* Elements rank reads from sendbuff and writes to recvbuff for a call of count. */
typedef void (*ref_elems_fn)(size_t count, int nranks, int rank, int root, size_t *send,
                             size_t *recv);

/* "Reduces data arrays of length count in sendbuff ... leaves identical copies of the result
 * in each recvbuff." */
static void allreduce_elems(size_t count, int n, int rank, int root, size_t *s, size_t *r)
{
    *s = count;
    *r = count;
}

/* "Copies count elements from sendbuff on the root rank to all ranks' recvbuff. sendbuff is
 * only used on rank root and ignored for other ranks." */
static void broadcast_elems(size_t count, int n, int rank, int root, size_t *s, size_t *r)
{
    *s = rank == root ? count : 0;
    *r = count;
}

/* "Reduce ... stores the result only in the recvbuff of the root rank. recvbuff is only used
 * on rank root and ignored for other ranks." */
static void reduce_elems(size_t count, int n, int rank, int root, size_t *s, size_t *r)
{
    *s = count;
    *r = rank == root ? count : 0;
}

/* "Gathers sendcount values from all GPUs into recvbuff, receiving data from rank i at offset
 * i*sendcount." */
static void allgather_elems(size_t count, int n, int rank, int root, size_t *s, size_t *r)
{
    *s = count;
    *r = count * (size_t)n;
}

/* "Reduces data in sendbuff ... leaves the reduced result scattered over the devices so that
 * recvbuff on rank i will contain the i-th block of the result." sendbuff holds
 * nranks*recvcount elements. */
static void reducescatter_elems(size_t count, int n, int rank, int root, size_t *s, size_t *r)
{
    *s = count * (size_t)n;
    *r = count;
}

/* "Each rank sends count elements to all other ranks and receives count elements from all
 * other ranks": both buffers hold count*nranks. */
static void alltoall_elems(size_t count, int n, int rank, int root, size_t *s, size_t *r)
{
    *s = count * (size_t)n;
    *r = count * (size_t)n;
}

/* "Each rank sends count elements from sendbuff to the root rank. On the root rank, data from
 * rank i will be at offset i*count of recvbuff" (recvbuff only used on root). */
static void gather_elems(size_t count, int n, int rank, int root, size_t *s, size_t *r)
{
    *s = count;
    *r = rank == root ? count * (size_t)n : 0;
}

/* "Each rank receives count elements from the root rank. On the root rank, count elements at
 * offset i*count of sendbuff are sent to rank i" (sendbuff only used on root). */
static void scatter_elems(size_t count, int n, int rank, int root, size_t *s, size_t *r)
{
    *s = rank == root ? count * (size_t)n : 0;
    *r = count;
}

/* ncclSend: "Send data from sendbuff to rank peer", count elements; nothing received. */
static void send_elems(size_t count, int n, int rank, int root, size_t *s, size_t *r)
{
    *s = count;
    *r = 0;
}

/* ncclRecv: "Receive data from rank peer into recvbuff", count elements; nothing sent. */
static void recv_elems(size_t count, int n, int rank, int root, size_t *s, size_t *r)
{
    *s = 0;
    *r = count;
}

/* For the calls that copy blocks: where block b of rank `to`'s recvbuff comes from (the rank
 * and the block of its sendbuff); 0 if that block is not written. */
typedef int (*ref_source_fn)(int to, int b, int nranks, int root, int *from, int *sblk);

static int allgather_source(int to, int b, int n, int root, int *from, int *sblk)
{
    *from = b; /* rank i's data at offset i*sendcount */
    *sblk = 0;
    return 1;
}

static int alltoall_source(int to, int b, int n, int root, int *from, int *sblk)
{
    *from = b; /* block j of rank i's sendbuff goes to block i of rank j's recvbuff */
    *sblk = to;
    return 1;
}

static int broadcast_source(int to, int b, int n, int root, int *from, int *sblk)
{
    *from = root;
    *sblk = 0;
    return b == 0;
}

static int gather_source(int to, int b, int n, int root, int *from, int *sblk)
{
    *from = b;
    *sblk = 0;
    return to == root;
}

static int scatter_source(int to, int b, int n, int root, int *from, int *sblk)
{
    *from = root;
    *sblk = to;
    return b == 0;
}

/* In place: 0 sendbuff == recvbuff; 1 sendbuff == recvbuff + rank*count (allgather, gather);
 * -1 recvbuff == sendbuff + rank*count (reducescatter, scatter). */
struct ref {
    const char *api;
    int reduces, rooted, p2p;
    ref_elems_fn elems;
    ref_source_fn source; /* NULL: reduces, or a send/recv */
    int in_place;
    int dev_coll;
};

static const struct ref refs[ZN_NCOLL_FACTS] = {
    [ZN_COLL_ALLREDUCE] = { "ncclAllReduce", 1, 0, 0, allreduce_elems, NULL, 0, ZN_COLL_ALLREDUCE },
    [ZN_COLL_BROADCAST] = { "ncclBroadcast", 0, 1, 0, broadcast_elems, broadcast_source, 0,
                            ZN_COLL_BROADCAST },
    [ZN_COLL_REDUCE] = { "ncclReduce", 1, 1, 0, reduce_elems, NULL, 0, ZN_COLL_REDUCE },
    [ZN_COLL_ALLGATHER] = { "ncclAllGather", 0, 0, 0, allgather_elems, allgather_source, 1,
                            ZN_COLL_ALLGATHER },
    [ZN_COLL_REDUCESCATTER] = { "ncclReduceScatter", 1, 0, 0, reducescatter_elems, NULL, -1,
                                ZN_COLL_REDUCESCATTER },
    [ZN_COLL_ALLTOALL] = { "ncclAlltoAll", 0, 0, 0, alltoall_elems, alltoall_source, 0,
                           ZN_COLL_ALLTOALL },
    [ZN_COLL_GATHER] = { "ncclGather", 0, 1, 0, gather_elems, gather_source, 1, ZN_COLL_GATHER },
    [ZN_COLL_SCATTER] = { "ncclScatter", 0, 1, 0, scatter_elems, scatter_source, -1,
                          ZN_COLL_SCATTER },
    [ZN_COLL_SEND] = { "ncclSend", 0, 0, 1, send_elems, NULL, 0, -1 },
    [ZN_COLL_RECV] = { "ncclRecv", 0, 0, 1, recv_elems, NULL, 0, -1 },
};

static const int nranks[] = { 1, 2, 3, 4, 5, 8 };
static const size_t counts[] = { 0, 1, 7, 1000, (size_t)1 << 31 };

ZT_TEST(every_row_has_a_reference)
{
    for (int c = 0; c < ZN_NCOLL_FACTS; c++) {
        const struct zn_coll_facts *f = zn_coll_facts((enum zn_coll)c);
        if (!refs[c].api) ZT_FAIL("collective %d (%s) has no reference here", c, f->name);
        ZT_EQ_STR(f->api, refs[c].api);
        ZT_ASSERT(f->name && *f->name && strcmp(f->name, "?"));
        ZT_EQ_STR(zn_coll_name((enum zn_coll)c), f->name);
        for (int d = 0; d < c; d++) ZT_ASSERT(strcmp(f->name, zn_coll_name((enum zn_coll)d)));
        /* The collectives proper come first: algorithms plan ZN_NCOLLS of them. */
        ZT_EQ_INT(f->p2p, c >= ZN_NCOLLS);
    }
    ZT_EQ_STR(zn_coll_name(ZN_NCOLL_FACTS), "?");
    ZT_EQ_STR(zn_coll_name((enum zn_coll) - 1), "?");
    ZT_EQ_INT(zn_coll_send_elems(ZN_NCOLL_FACTS, 5, 2, 1), 0);
}

ZT_TEST(op_root_peer_and_kernel)
{
    for (int c = 0; c < ZN_NCOLL_FACTS; c++) {
        const struct zn_coll_facts *f = zn_coll_facts((enum zn_coll)c);
        ZT_EQ_INT(f->reduces, refs[c].reduces);
        ZT_EQ_INT(f->rooted, refs[c].rooted);
        ZT_EQ_INT(f->p2p, refs[c].p2p);
        ZT_EQ_INT(f->dev_coll, refs[c].dev_coll);
    }
}

/* Elements (and bytes, for every element size) each rank sends from and receives into, for
 * every rank count, count, rank and root. */
ZT_TEST(elements_per_rank)
{
    static const size_t esizes[] = { 1, 2, 4, 8 };
    for (int c = 0; c < ZN_NCOLL_FACTS; c++)
        for (size_t ni = 0; ni < sizeof(nranks) / sizeof(nranks[0]); ni++)
            for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
                int n = nranks[ni];
                size_t count = counts[ci];
                for (int root = 0; root < n; root++)
                    for (int rank = 0; rank < n; rank++) {
                        size_t s, r;
                        refs[c].elems(count, n, rank, root, &s, &r);
                        int is_root = rank == root;
                        size_t gs = zn_coll_send_elems((enum zn_coll)c, count, n, is_root);
                        size_t gr = zn_coll_recv_elems((enum zn_coll)c, count, n, is_root);
                        if (gs != s || gr != r)
                            ZT_FAIL("%s count %zu nranks %d rank %d root %d: send %zu recv %zu, "
                                    "NCCL says %zu and %zu",
                                    refs[c].api, count, n, rank, root, gs, gr, s, r);
                        for (size_t e = 0; e < sizeof(esizes) / sizeof(esizes[0]); e++)
                            ZT_EQ_INT(gs * esizes[e], s * esizes[e]);
                        /* The largest buffer on any rank: the root's or another's. */
                        size_t ms, mr, ks, kr;
                        refs[c].elems(count, n, root, root, &ms, &mr);
                        refs[c].elems(count, n, (root + 1) % n, root, &ks, &kr);
                        if (ks > ms) ms = ks;
                        if (kr > mr) mr = kr;
                        ZT_EQ_INT(count * (size_t)zn_coll_send_blocks((enum zn_coll)c, n), ms);
                        ZT_EQ_INT(count * (size_t)zn_coll_recv_blocks((enum zn_coll)c, n), mr);
                    }
            }
}

ZT_TEST(in_place_layout)
{
    for (int c = 0; c < ZN_NCOLL_FACTS; c++) {
        if (zn_coll_in_place_offset((enum zn_coll)c) != refs[c].in_place)
            ZT_FAIL("%s: in-place layout %d, NCCL's is %d", refs[c].api,
                    zn_coll_in_place_offset((enum zn_coll)c), refs[c].in_place);
    }
}

/* Every (from, to) pair of every copying collective: the route says exactly what the
 * reference says, and every written block of every rank's output is some route's. */
ZT_TEST(routes_of_copying_collectives)
{
    for (int c = 0; c < ZN_NCOLL_FACTS; c++) {
        if (!refs[c].source) continue;
        for (size_t ni = 0; ni < sizeof(nranks) / sizeof(nranks[0]); ni++) {
            int n = nranks[ni];
            for (int root = 0; root < n; root++)
                for (int to = 0; to < n; to++) {
                    size_t s, r;
                    refs[c].elems(1, n, to, root, &s, &r);
                    int written = 0;
                    for (int b = 0; b < n; b++) {
                        int from, sblk;
                        if (!refs[c].source(to, b, n, root, &from, &sblk)) continue;
                        written++;
                        int gs = -1, gd = -1;
                        if (!zn_coll_route((enum zn_coll)c, from, to, root, &gs, &gd))
                            ZT_FAIL("%s nranks %d root %d: no route %d -> %d", refs[c].api, n, root,
                                    from, to);
                        ZT_EQ_INT(gs, sblk);
                        ZT_EQ_INT(gd, b);
                    }
                    /* Nothing else reaches `to`, and it receives all it holds. */
                    ZT_EQ_INT((size_t)written, r);
                    for (int from = 0; from < n; from++) {
                        int gs, gd, f2, s2;
                        if (!zn_coll_route((enum zn_coll)c, from, to, root, &gs, &gd)) continue;
                        ZT_ASSERT(refs[c].source(to, gd, n, root, &f2, &s2) && f2 == from &&
                                  s2 == gs);
                    }
                }
        }
    }
}

ZT_MAIN(ZT_CASE(every_row_has_a_reference), ZT_CASE(op_root_peer_and_kernel),
        ZT_CASE(elements_per_rank), ZT_CASE(in_place_layout),
        ZT_CASE(routes_of_copying_collectives))
