/*
 * Bootstrap collectives: the address exchange at join, allgather and barrier.
 *
 * Why not over the ring: a ring allgather takes n - 1 steps, and in each step every rank must
 * run once. With hundreds of ranks on a few cores that is n^2 wake-ups per allgather, and init
 * did four of them (256 ranks on 2 cores: 27 s). Here an allgather is Bruck's algorithm over
 * the point-to-point connections: ceil(log2 n) rounds, in round k a rank sends what it has to
 * rank - 2^k and receives as much from rank + 2^k, so each rank sends and receives log2 n
 * messages and n - 1 blocks in all.
 *
 * Bruck needs the peers' addresses, which a rank learns at join: the root tells each rank only
 * its ring successor's, and rank 0 the whole table, which rank 0 sends down a binomial tree
 * (log2 n messages at most per rank, log2 n hops). With several roots (scalable.c) no root has
 * the whole table: the addresses first go once around the ring, each rank appending its own
 * (one message per rank, n hops but only one rank awake per hop), back to rank 0. The ring itself
 * stays: ABORT frames travel on it, and a rank waiting in any of these collectives watches its
 * predecessor's connection, so that a death is seen at once (BYE tells a normal close from a death;
 * boot.c).
 */
#include "boot_internal.h"
#include "util/err.h"

#include <stdlib.h>
#include <string.h>

/* Tags of the collectives' point-to-point messages; the low 16 bits carry the round. Callers
 * of zn_boot_send/recv use their own tags (shrink: "SHRK"), which never fall in this range. */
#define TAG_ALLGATHER 0x42470000u /* "BG" */

/* One DATA frame of exactly len bytes from the ring predecessor. */
static ncclResult_t ring_recv(struct zn_boot *b, void *buf, size_t len)
{
    int prev = (b->rank + b->nranks - 1) % b->nranks;
    struct boot_io io = { .send_fd = -1,
                          .recv_fd = b->prev_fd,
                          .rd = &b->prev_rd,
                          .blame_recv = prev,
                          .what = "address exchange" };
    ncclResult_t res = zn_boot_io_run(b, &io);
    if (res == ncclSuccess && b->prev_rd.hdr.len != 8 + len) {
        char who[96];
        zn_boot_peer_str(b, prev, who, sizeof(who));
        res = zn_error(ncclInternalError, ZN_BOOT,
                       "bootstrap address exchange: %s sent %llu bytes, expected %zu", who,
                       (unsigned long long)b->prev_rd.hdr.len - 8, len);
        zn_boot_abort(b, res, zn_last_error());
    }
    if (res == ncclSuccess) memcpy(buf, b->prev_rd.payload + 8, len);
    zn_frame_reader_reset(&b->prev_rd);
    return res;
}

static ncclResult_t ring_send(struct zn_boot *b, const void *buf, size_t len)
{
    uint32_t hdr[2] = { ZN_BOOT_TAG_ADDRS, 0 };
    struct zn_boot_frame f = {
        .type = ZN_BOOT_DATA, .version = ZN_BOOT_VERSION, .magic = b->magic, .len = 8 + len
    };
    struct boot_io io = { .send_fd = b->next_fd,
                          .part = { &f, hdr, buf },
                          .len = { sizeof(f), sizeof(hdr), len },
                          .recv_fd = -1,
                          .blame_send = (b->rank + 1) % b->nranks,
                          .what = "address exchange" };
    return zn_boot_io_run(b, &io);
}

ncclResult_t zn_boot_share_addrs(struct zn_boot *b, int rank0_has_all)
{
    int n = b->nranks, r = b->rank;
    size_t a = sizeof(*b->addrs);
    if (n == 1) return ncclSuccess;
    /* Around the ring: rank r gets the addresses of ranks 0..r-1 and passes on 0..r; rank 0
     * gets the whole table from rank n - 1. */
    if (!rank0_has_all) {
        if (r > 0) ZN_CHECK(ring_recv(b, b->addrs, (size_t)r * a));
        ZN_CHECK(ring_send(b, b->addrs, (size_t)(r + 1) * a));
        if (r == 0) ZN_CHECK(ring_recv(b, b->addrs, (size_t)n * a));
    }
    /* Down the binomial tree from rank 0: rank r's parent is r minus its highest bit, its
     * children are r + 2^k for every 2^k above r. */
    if (r > 0) {
        int high = 1;
        while (high * 2 <= r) high *= 2;
        ZN_CHECK(zn_boot_recv(b, r - high, ZN_BOOT_TAG_ADDRS, b->addrs, (size_t)n * a));
    }
    for (int d = 1; d < n; d *= 2)
        if (d > r && r + d < n)
            ZN_CHECK(zn_boot_send(b, r + d, ZN_BOOT_TAG_ADDRS, b->addrs, (size_t)n * a));
    return ncclSuccess;
}

/* Bruck: tmp holds the blocks of ranks r, r+1, ... (mod n) in that order; round k doubles what
 * it holds, then the blocks are put back in rank order. */
ncclResult_t zn_boot_allgather(struct zn_boot *b, void *buf, size_t block)
{
    int n = b->nranks, r = b->rank;
    if (b->failed)
        return zn_error(b->fail_code, ZN_BOOT, "bootstrap already failed; see the earlier error");
    if (n == 1) return ncclSuccess;
    char *tmp = malloc((size_t)n * block);
    if (!tmp) return zn_error(ncclSystemError, ZN_BOOT, "out of memory for an allgather");
    memcpy(tmp, (char *)buf + (size_t)r * block, block);
    ncclResult_t res = ncclSuccess;
    uint32_t round = 0;
    for (int dist = 1; dist < n && res == ncclSuccess; dist *= 2, round++) {
        size_t cnt = (size_t)(dist < n - dist ? dist : n - dist);
        res = zn_boot_send(b, (r - dist + n) % n, TAG_ALLGATHER | round, tmp, cnt * block);
        if (res == ncclSuccess)
            res = zn_boot_recv(b, (r + dist) % n, TAG_ALLGATHER | round, tmp + (size_t)dist * block,
                               cnt * block);
    }
    if (res == ncclSuccess)
        for (int i = 0; i < n; i++)
            memcpy((char *)buf + (size_t)((r + i) % n) * block, tmp + (size_t)i * block, block);
    else if (!b->failed)
        /* A size mismatch (ranks made different calls): the others must not wait for us. */
        zn_boot_abort(b, res, zn_last_error());
    free(tmp);
    return res;
}

ncclResult_t zn_boot_barrier(struct zn_boot *b)
{
    char stack[256], *bytes = stack;
    if ((size_t)b->nranks > sizeof(stack) && !(bytes = malloc((size_t)b->nranks)))
        return zn_error(ncclSystemError, ZN_BOOT, "out of memory");
    bytes[b->rank] = 1;
    ncclResult_t res = zn_boot_allgather(b, bytes, 1);
    if (bytes != stack) free(bytes);
    return res;
}
