/*
 * boot_scale_check: what init costs each rank in bootstrap messages grows as log2(n), not n,
 * checked by counting (zn_boot_get_stats) rather than timing, so that it holds on a loaded
 * machine. Started through zinc-run on a few sizes (tests/boot/CMakeLists.txt):
 *
 *   zinc-run -n 16 boot_scale_check
 *
 * With L = ceil(log2 n):
 *  - an allgather or barrier sends exactly L DATA frames per rank, L * 32 header bytes and the
 *    n - 1 other blocks (measured between two collectives, once the connections exist);
 *  - joining sends at most 2 + 2 L frames per rank (root HELLO, ring HELLO, and a HELLO and the
 *    address table to each binomial-tree child);
 *  - a communicator's whole init (ncclCommInitRank: join, peer info, arena check, barrier)
 *    sends at most 4 + 6 L frames per rank; a ring allgather instead would send n - 1 per
 *    collective (at n = 16: 60 and more);
 *  - over all ranks, every frame sent was received: the sums of sent and received frames and
 *    bytes differ only by the root's share (a HELLO of 72 bytes to it from every rank, a
 *    RING_INFO of 64 back, and to rank 0 the address table, 32 + n * sizeof(address) bytes).
 */
#include "api/comm.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/launcher.h"
#include "bootstrap/wire.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, nranks;
static int failures;

#include "../coll/mp_check.h"

static int ceil_log2(int n)
{
    int l = 0;
    while ((1 << l) < n) l++;
    return l;
}

static void allgather_blocks(struct zn_boot *b, size_t block)
{
    uint8_t *buf = calloc((size_t)nranks, block);
    memset(buf + (size_t)rank * block, rank + 1, block);
    NCCLCHECK(zn_boot_allgather(b, buf, block));
    for (int r = 0; r < nranks; r++)
        EXPECT(buf[(size_t)r * block] == (uint8_t)(r + 1), "allgather: block of rank %d wrong", r);
    free(buf);
}

/* Every rank's counters, gathered after they were read: the totals must balance. */
static void check_balance(struct zn_boot *b, const struct zn_boot_stats *mine, const char *what)
{
    struct zn_boot_stats *all = calloc((size_t)nranks, sizeof(*all));
    all[rank] = *mine;
    NCCLCHECK(zn_boot_allgather(b, all, sizeof(*all)));
    uint64_t ms = 0, mr = 0, bs = 0, br = 0;
    for (int r = 0; r < nranks; r++) {
        ms += all[r].msgs_sent;
        mr += all[r].msgs_recv;
        bs += all[r].bytes_sent;
        br += all[r].bytes_recv;
    }
    uint64_t table = 32 + (uint64_t)nranks * sizeof(union zn_sockaddr);
    /* Each rank's HELLO to the root is answered by a shorter RING_INFO. */
    uint64_t diff = sizeof(struct zn_boot_hello) - sizeof(struct zn_boot_ring_info);
    EXPECT(ms + 1 == mr, "%s: ranks sent %llu frames in all and received %llu (one more expected)",
           what, (unsigned long long)ms, (unsigned long long)mr);
    EXPECT(bs + table == br + diff * (uint64_t)nranks,
           "%s: ranks sent %llu bytes in all and received %llu, expected %llu", what,
           (unsigned long long)bs, (unsigned long long)br,
           (unsigned long long)(bs + table - diff * (uint64_t)nranks));
    free(all);
}

static void check_bootstrap(int L)
{
    ncclUniqueId id;
    NCCLCHECK(zn_boot_get_unique_id(&id));
    atomic_int abort_flag = 0;
    struct zn_boot *b;
    NCCLCHECK(zn_boot_init(&id, rank, nranks, &abort_flag, &b));
    struct zn_boot_stats join, s1, s2, end;
    zn_boot_get_stats(b, &join);
    EXPECT(join.msgs_sent <= (uint64_t)(2 + 2 * L), "joining sent %llu frames, at most %d expected",
           (unsigned long long)join.msgs_sent, 2 + 2 * L);
    allgather_blocks(b, 100);
    zn_boot_get_stats(b, &s1);
    const size_t block = 1000;
    allgather_blocks(b, block);
    zn_boot_get_stats(b, &s2);
    uint64_t want_bytes = 32ull * (uint64_t)L + (uint64_t)(nranks - 1) * block;
    EXPECT(s2.msgs_sent - s1.msgs_sent == (uint64_t)L,
           "an allgather sent %llu frames, expected ceil(log2 %d) = %d",
           (unsigned long long)(s2.msgs_sent - s1.msgs_sent), nranks, L);
    EXPECT(s2.bytes_sent - s1.bytes_sent == want_bytes,
           "an allgather of %zu-byte blocks sent %llu bytes, expected %llu", block,
           (unsigned long long)(s2.bytes_sent - s1.bytes_sent), (unsigned long long)want_bytes);
    NCCLCHECK(zn_boot_barrier(b));
    zn_boot_get_stats(b, &end);
    EXPECT(end.msgs_sent - s2.msgs_sent == (uint64_t)L, "a barrier sent %llu frames, expected %d",
           (unsigned long long)(end.msgs_sent - s2.msgs_sent), L);
    check_balance(b, &end, "bootstrap");
    zn_boot_destroy(b);
}

static void check_comm_init(int L)
{
    ncclUniqueId id;
    NCCLCHECK(ncclGetUniqueId(&id));
    ncclComm_t comm;
    NCCLCHECK(ncclCommInitRank(&comm, nranks, id, rank));
    struct zn_boot_stats st;
    zn_boot_get_stats(comm->boot, &st);
    EXPECT(st.msgs_sent <= (uint64_t)(4 + 6 * L),
           "communicator init sent %llu bootstrap frames, at most 4 + 6 ceil(log2 %d) = %d "
           "expected",
           (unsigned long long)st.msgs_sent, nranks, 4 + 6 * L);
    check_balance(comm->boot, &st, "communicator init");
    NCCLCHECK(ncclCommDestroy(comm));
}

int main(void)
{
    struct zn_launch_info li;
    zn_launch_info_get(&li);
    rank = li.rank;
    nranks = li.nranks;
    int L = ceil_log2(nranks);
    check_bootstrap(L);
    check_comm_init(L);
    if (failures) {
        fprintf(stderr, "[%d] boot_scale_check: %d failure(s)\n", rank, failures);
        return 1;
    }
    if (rank == 0) printf("boot_scale_check: %d ranks OK\n", nranks);
    return 0;
}
