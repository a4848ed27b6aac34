/*
 * boot_check: the bootstrap's internal API on any number of ranks, started through zinc-run:
 *
 *   zinc-run -n 8 boot_check
 *
 * Every rank derives the same unique id from ZINC_COMM_ID (rank 0 hosts the root), joins, and
 * checks allgather (1 B, 100 B and 64 KB blocks), point-to-point messages to the next two
 * ranks received in the opposite order of their tags (so they wait in the unexpected-message
 * queue), and barrier (including that it really waits for the last rank).
 */
#include "bootstrap/bootstrap.h"
#include "bootstrap/launcher.h"
#include "util/clock.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int rank, nranks;
static int failures;

#include "../coll/mp_check.h"

/* The byte at offset i of a block that rank src contributes (or sends to dst with tag). */
static uint8_t pattern(int src, int dst, uint32_t tag, size_t i)
{
    uint32_t x = (uint32_t)src * 2654435761u ^ (uint32_t)dst * 40503u ^ tag * 97u ^ (uint32_t)i;
    x ^= x >> 13;
    x *= 0x5bd1e995u;
    return (uint8_t)(x ^ (x >> 15));
}

static void check_allgather(struct zn_boot *b, size_t block)
{
    uint8_t *buf = malloc(block * (size_t)nranks);
    memset(buf, 0xEE, block * (size_t)nranks);
    for (size_t i = 0; i < block; i++) buf[(size_t)rank * block + i] = pattern(rank, -1, 0, i);
    NCCLCHECK(zn_boot_allgather(b, buf, block));
    for (int r = 0; r < nranks; r++) {
        size_t bad = block;
        for (size_t i = 0; i < block && bad == block; i++)
            if (buf[(size_t)r * block + i] != pattern(r, -1, 0, i)) bad = i;
        EXPECT(bad == block, "allgather of %zu-byte blocks: block of rank %d wrong at byte %zu",
               block, r, bad);
    }
    free(buf);
}

enum { TAG_A = 7, TAG_B = 9 };

static size_t msg_len(uint32_t tag, int src, int dst, int k)
{
    return tag == TAG_A ? (size_t)(37 + src + k) : (size_t)(70000 + dst * 3 + k);
}

/* Sends to (r+1)%n and (r+2)%n with tag A then tag B; receives tag B before tag A, so the tag-A
 * message always waits in the unexpected queue. With 1 or 2 ranks some of these are messages
 * to self, and with 1 rank the same (source, tag) pair carries two messages, which must
 * arrive in the order they were sent. */
static void check_send_recv(struct zn_boot *b)
{
    uint32_t tags[2] = { TAG_A, TAG_B };
    for (int k = 1; k <= 2; k++) {
        int dst = (rank + k) % nranks;
        for (int t = 0; t < 2; t++) {
            size_t len = msg_len(tags[t], rank, dst, k);
            uint8_t *m = malloc(len);
            for (size_t i = 0; i < len; i++) m[i] = pattern(rank, dst, tags[t] + 1000u * k, i);
            NCCLCHECK(zn_boot_send(b, dst, tags[t], m, len));
            free(m);
        }
    }
    for (int k = 1; k <= 2; k++) {
        int src = (rank - k + 2 * nranks) % nranks;
        for (int t = 1; t >= 0; t--) {
            size_t len = msg_len(tags[t], src, rank, k);
            uint8_t *m = malloc(len);
            memset(m, 0, len);
            NCCLCHECK(zn_boot_recv(b, src, tags[t], m, len));
            size_t bad = len;
            for (size_t i = 0; i < len && bad == len; i++)
                if (m[i] != pattern(src, rank, tags[t] + 1000u * k, i)) bad = i;
            EXPECT(bad == len, "message from %d tag %u (distance %d, %zu bytes) wrong at byte %zu",
                   src, tags[t], k, len, bad);
            free(m);
        }
    }
}

static void sleep_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };
    nanosleep(&ts, NULL);
}

/* A barrier must not return on any rank before the last rank entered it. The last rank enters
 * 300 ms late and tells the others when (CLOCK_MONOTONIC is one clock for every process of the
 * host): each rank's return must come after that, however late the scheduler let it run. */
static void check_barrier(struct zn_boot *b)
{
    for (int i = 0; i < 10; i++) NCCLCHECK(zn_boot_barrier(b));
    if (nranks < 2) return;
    int64_t entered = 0;
    if (rank == nranks - 1) {
        sleep_ms(300);
        entered = zn_now_ns();
    }
    NCCLCHECK(zn_boot_barrier(b));
    int64_t left = zn_now_ns();
    int64_t *all = calloc((size_t)nranks, sizeof(*all));
    all[rank] = entered;
    NCCLCHECK(zn_boot_allgather(b, all, sizeof(*all)));
    entered = all[nranks - 1];
    free(all);
    EXPECT(left >= entered, "barrier returned %.1f ms before rank %d entered it",
           (entered - left) / 1e6, nranks - 1);
}

int main(void)
{
    struct zn_launch_info li;
    zn_launch_info_get(&li);
    rank = li.rank;
    nranks = li.nranks;
    ncclUniqueId id;
    NCCLCHECK(zn_boot_get_unique_id(&id));
    atomic_int abort_flag = 0;
    struct zn_boot *b;
    int64_t t0 = zn_now_ns();
    NCCLCHECK(zn_boot_init(&id, rank, nranks, &abort_flag, &b));
    double init_ms = (zn_now_ns() - t0) / 1e6;
    EXPECT(zn_boot_rank(b) == rank && zn_boot_nranks(b) == nranks, "rank/nranks %d/%d, want %d/%d",
           zn_boot_rank(b), zn_boot_nranks(b), rank, nranks);
    for (int r = 0; r < nranks; r++) {
        int fam = zn_boot_peer_addr(b, r)->sa.sa_family;
        EXPECT(fam == AF_INET || fam == AF_INET6, "address of rank %d has family %d", r, fam);
    }
    size_t blocks[] = { 1, 100, 64 * 1024 };
    for (size_t i = 0; i < sizeof(blocks) / sizeof(blocks[0]); i++) check_allgather(b, blocks[i]);
    check_send_recv(b);
    /* Twice: the second round reuses the connections the first one opened. */
    check_send_recv(b);
    check_barrier(b);
    zn_boot_destroy(b);
    if (failures) {
        fprintf(stderr, "[%d] boot_check: %d failure(s)\n", rank, failures);
        return 1;
    }
    if (rank == 0) printf("boot_check: %d rank(s) OK (init %.1f ms on rank 0)\n", nranks, init_ms);
    return 0;
}
