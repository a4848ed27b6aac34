/*
 * ncclCommShrink: a new communicator of the parent's ranks minus excludeRanksList, the
 * survivors renumbered in parent-rank order. Only the survivors call it.
 *
 * The excluded ranks may be dead, so nothing may touch them: no parent allgather (the
 * bootstrap ring passes through them) and no parent transport. The survivors exchange their
 * new listening addresses with point-to-point bootstrap messages, which connect directly to
 * each survivor's parent listener (addresses learned at parent init):
 *
 *     survivor i  --- record {parent rank, hash of the exclusion list, flags, address} --->
 *                                                              leader (lowest survivor)
 *     survivor i  <--- table of every survivor's record + verdict + random nonce ---
 *
 * The leader checks that everybody passed the same list and flags, and draws a nonce so that
 * two shrinks of one parent with the same list still get different magics (and shared-memory
 * names). Then the survivors join a new ring directly, as split does. The leader handles O(m)
 * messages, every other survivor two.
 *
 * NCCL_SHRINK_ABORT first revokes the parent (revoke.c): whatever another thread runs on it
 * fails at once, and its bootstrap forgets an earlier failure. The parent may be in an error
 * state then (a peer died); with NCCL_SHRINK_DEFAULT it must be healthy.
 */
#include "group.h"
#include "mgmt.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define ZN_TAG_SHRINK 0x5348524bu /* "SHRK": parent bootstrap messages of a shrink */

struct shrink_rec {
    uint64_t excl_hash;
    uint64_t nonce; /* the leader's, in the table */
    int32_t parent_rank;
    int32_t flags;
    int32_t status; /* the leader's verdict, in the table: 0, or the index of a bad record */
    int32_t pad;
    uint8_t addr[32];
};
_Static_assert(sizeof(union zn_sockaddr) <= 32, "address fits the record");

static uint64_t mix(uint64_t h, uint64_t v)
{
    h = (h ^ v) * 0x100000001b3ull;
    return h ^ (h >> 29);
}

/* Checks the list; fills excl (one flag per parent rank) and its hash. */
static ncclResult_t read_excluded(struct ncclComm *p, const int *list, int count, char *excl,
                                  uint64_t *hash)
{
    for (int i = 0; i < count; i++) {
        int r = list[i];
        if (r < 0 || r >= p->nranks)
            return zn_error(ncclInvalidArgument, ZN_INIT,
                            "ncclCommShrink: excludeRanksList[%d] = %d is not a rank of the "
                            "communicator (nranks %d)",
                            i, r, p->nranks);
        if (r == p->rank)
            return zn_error(ncclInvalidArgument, ZN_INIT,
                            "ncclCommShrink: excludeRanksList[%d] = %d is the calling rank: "
                            "excluded ranks must not call ncclCommShrink",
                            i, r);
        excl[r] = 1;
    }
    uint64_t h = 0xcbf29ce484222325ull;
    for (int r = 0; r < p->nranks; r++)
        if (excl[r]) h = mix(h, (uint64_t)r + 1);
    *hash = h;
    return ncclSuccess;
}

/* The leader's side: gather every record, judge, send the table back. */
static ncclResult_t lead(struct zn_boot *b, const int *surv, int m, struct shrink_rec *table)
{
    for (int i = 1; i < m; i++)
        ZN_CHECK(zn_boot_recv(b, surv[i], ZN_TAG_SHRINK, &table[i], sizeof(*table)));
    uint64_t nonce = 0;
    if (getrandom(&nonce, sizeof(nonce), 0) != sizeof(nonce))
        return zn_error(ncclSystemError, ZN_INIT, "ncclCommShrink: getrandom failed: %s",
                        strerror(errno));
    int bad = 0;
    for (int i = 1; i < m && !bad; i++)
        if (table[i].parent_rank != surv[i] || table[i].excl_hash != table[0].excl_hash ||
            table[i].flags != table[0].flags)
            bad = i;
    for (int i = 0; i < m; i++) {
        table[i].nonce = nonce;
        table[i].status = bad;
    }
    for (int i = 1; i < m; i++)
        ZN_CHECK(zn_boot_send(b, surv[i], ZN_TAG_SHRINK, table, (size_t)m * sizeof(*table)));
    return ncclSuccess;
}

static ncclResult_t exchange(struct ncclComm *p, const int *surv, int m, int me,
                             struct shrink_rec *table)
{
    if (me == 0) return lead(p->boot, surv, m, table);
    ZN_CHECK(zn_boot_send(p->boot, surv[0], ZN_TAG_SHRINK, &table[me], sizeof(*table)));
    return zn_boot_recv(p->boot, surv[0], ZN_TAG_SHRINK, table, (size_t)m * sizeof(*table));
}

static ncclResult_t shrink(struct ncclComm *p, const int *list, int count, int flags,
                           const ncclConfig_t *cfg, ncclComm_t *newcomm)
{
    int n = p->nranks, m = 0, me = -1;
    char *excl = calloc((size_t)n, 1);
    int *surv = calloc((size_t)n, sizeof(int));
    struct shrink_rec *table = calloc((size_t)n, sizeof(*table));
    union zn_sockaddr *addrs = calloc((size_t)n, sizeof(*addrs));
    struct zn_boot_listener l = { .fd = -1 };
    uint64_t hash = 0;
    ncclResult_t res = ncclSuccess;
    if (!excl || !surv || !table || !addrs) {
        res = zn_error(ncclSystemError, ZN_INIT, "ncclCommShrink: out of memory");
        goto out;
    }
    ZN_CHECK_GOTO(read_excluded(p, list, count, excl, &hash), res, out);
    for (int r = 0; r < n; r++) {
        if (excl[r]) continue;
        if (r == p->rank) me = m;
        surv[m++] = r;
    }
    ZN_CHECK_GOTO(zn_boot_listener_create(&l), res, out);
    table[me] = (struct shrink_rec){ .excl_hash = hash, .parent_rank = p->rank, .flags = flags };
    memcpy(table[me].addr, &l.addr, sizeof(l.addr));
    ZN_CHECK_GOTO(exchange(p, surv, m, me, table), res, out);
    int bad = table[0].status;
    if (bad < 0 || bad >= m) {
        res = zn_error(ncclInternalError, ZN_INIT, "ncclCommShrink: malformed answer (%d)", bad);
        goto out;
    }
    if (bad) {
        res = zn_error(ncclInvalidUsage, ZN_INIT,
                       "ncclCommShrink: rank %d passed a different excludeRanksList or "
                       "shrinkFlags than rank %d (or is not the rank expected there); every "
                       "survivor must pass the same",
                       table[bad].parent_rank, surv[0]);
        goto out;
    }
    for (int i = 0; i < m; i++) memcpy(&addrs[i], table[i].addr, sizeof(addrs[i]));
    uint64_t magic = mix(mix(p->comm_hash ^ 0x5348524b, table[0].nonce), hash) | 1;
    zn_info(ZN_INIT, "shrink of comm %p (%s): %d rank(s) excluded, rank %d -> rank %d of %d",
            (void *)p, flags == NCCL_SHRINK_ABORT ? "abort" : "default", n - m, p->rank, me, m);
    res = zn_comm_create_child(p, m, me, magic, &l, addrs, cfg, newcomm);
    addrs = NULL;
out:
    zn_boot_listener_close(&l);
    free(excl);
    free(surv);
    free(table);
    free(addrs);
    return res;
}

ZN_API(ncclResult_t, ncclCommShrink, ncclComm_t comm, int *excludeRanksList, int excludeRanksCount,
       ncclComm_t *newcomm, ncclConfig_t *config, int shrinkFlags)
{
    ZN_CHECK(zn_comm_check(comm, "ncclCommShrink"));
    if (!newcomm) return zn_error(ncclInvalidArgument, ZN_INIT, "ncclCommShrink: newcomm is NULL");
    *newcomm = NULL;
    if (shrinkFlags != NCCL_SHRINK_DEFAULT && shrinkFlags != NCCL_SHRINK_ABORT)
        return zn_error(ncclInvalidArgument, ZN_INIT,
                        "ncclCommShrink: shrinkFlags 0x%x is neither NCCL_SHRINK_DEFAULT nor "
                        "NCCL_SHRINK_ABORT",
                        (unsigned)shrinkFlags);
    if (excludeRanksCount < 0 || (excludeRanksCount > 0 && !excludeRanksList))
        return zn_error(ncclInvalidArgument, ZN_INIT,
                        "ncclCommShrink: invalid excludeRanksCount %d with excludeRanksList %p",
                        excludeRanksCount, (void *)excludeRanksList);
    if (zn_comm_init_pending(comm) || !comm->boot)
        return zn_error(ncclInvalidUsage, ZN_INIT, "ncclCommShrink: the parent communicator %s",
                        comm->boot ? "is still initialising" : "never finished its init");
    ncclConfig_t cfg = comm->config;
    if (config) ZN_CHECK(zn_config_apply(config, &cfg));
    if (shrinkFlags == NCCL_SHRINK_ABORT) {
        ZN_CHECK(zn_comm_revoke_sync(comm, "ncclCommShrink"));
    } else {
        ncclResult_t st = (ncclResult_t)atomic_load(&comm->async_err);
        if (atomic_load(&comm->revoked) && st != ncclInProgress) st = ncclSuccess;
        if (st != ncclSuccess)
            return zn_error(st == ncclInProgress ? ncclInvalidUsage : st, ZN_INIT,
                            "ncclCommShrink: the parent communicator is %s",
                            st == ncclInProgress ? "busy (a non-blocking call has not finished)"
                                                 : "in an error state: use NCCL_SHRINK_ABORT");
    }
    atomic_fetch_add(&comm->busy, 1);
    ncclResult_t res =
        shrink(comm, excludeRanksList, excludeRanksCount, shrinkFlags, &cfg, newcomm);
    atomic_fetch_sub(&comm->busy, 1);
    if (res != ncclSuccess && res != ncclInProgress) zn_comm_save_error(comm);
    return res;
}
