/*
 * ncclCommSplit: the members of each color learn each other's bootstrap addresses from one
 * allgather on the parent, then join a new ring directly (no root). The new communicator's
 * magic is derived from the parent's hash, the split's sequence number and the color, so
 * every member derives the same one and different splits never cross-connect.
 */
#include "group.h"
#include "mgmt.h"

#include <stdlib.h>
#include <string.h>

struct split_entry {
    int32_t color, key, rank, pad;
    uint8_t addr[32];
};

static int cmp_key(const void *a, const void *b)
{
    const struct split_entry *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return x->rank < y->rank ? -1 : x->rank > y->rank;
}

static ncclResult_t split(struct ncclComm *p, int color, int key, ncclComm_t *newcomm,
                          const ncclConfig_t *cfg)
{
    struct zn_boot_listener l = { .fd = -1 };
    if (color != NCCL_SPLIT_NOCOLOR) ZN_CHECK(zn_boot_listener_create(&l));
    int n = p->nranks;
    struct split_entry *all = calloc((size_t)n, sizeof(*all));
    if (!all) {
        zn_boot_listener_close(&l);
        return zn_error(ncclSystemError, ZN_INIT, "out of memory");
    }
    all[p->rank] = (struct split_entry){ .color = color, .key = key, .rank = p->rank };
    memcpy(all[p->rank].addr, &l.addr, sizeof(l.addr));
    ncclResult_t res = zn_boot_allgather(p->boot, all, sizeof(*all));
    uint64_t seq = ++p->split_count;
    if (res != ncclSuccess || color == NCCL_SPLIT_NOCOLOR) {
        free(all);
        zn_boot_listener_close(&l);
        return res;
    }
    /* Keep this color's members, ordered by (key, parent rank). */
    int m = 0;
    for (int r = 0; r < n; r++)
        if (all[r].color == color) all[m++] = all[r];
    qsort(all, (size_t)m, sizeof(*all), cmp_key);
    int me = 0;
    union zn_sockaddr *addrs = calloc((size_t)m, sizeof(*addrs));
    if (!addrs) {
        free(all);
        zn_boot_listener_close(&l);
        return zn_error(ncclSystemError, ZN_INIT, "out of memory");
    }
    for (int i = 0; i < m; i++) {
        if (all[i].rank == p->rank) me = i;
        memcpy(&addrs[i], all[i].addr, sizeof(addrs[i]));
    }
    free(all);
    uint64_t magic = p->comm_hash;
    uint64_t mix[2] = { seq, (uint64_t)(uint32_t)color };
    for (int i = 0; i < 2; i++) magic = (magic ^ mix[i]) * 0x100000001b3ull;
    zn_info(ZN_INIT, "split of comm %p: color %d key %d -> rank %d of %d", (void *)p, color, key,
            me, m);
    return zn_comm_create_child(p, m, me, magic | 1, &l, addrs, cfg, newcomm);
}

ncclResult_t zn_comm_create_child(struct ncclComm *p, int m, int me, uint64_t magic,
                                  struct zn_boot_listener *l, union zn_sockaddr *addrs,
                                  const ncclConfig_t *cfg, ncclComm_t *newcomm)
{
    struct ncclComm *c;
    ncclResult_t res = zn_comm_alloc(m, me, cfg, &c);
    if (res != ncclSuccess) {
        free(addrs);
        zn_boot_listener_close(l);
        return res;
    }
    c->kind = p->kind;
    c->cuda_dev = p->cuda_dev;
    struct zn_join j = { .from_addrs = 1, .magic = magic, .listener = *l, .addrs = addrs };
    zn_boot_get_secret(p->boot, &j.secret);
    l->fd = -1;
    if (!cfg->blocking) {
        res = zn_comm_setup_async(c, &j);
        if (res != ncclSuccess) {
            zn_comm_free(c);
            return res;
        }
        *newcomm = c;
        return ncclInProgress;
    }
    res = zn_comm_setup(c, &j);
    if (res != ncclSuccess) {
        zn_comm_free(c);
        return res;
    }
    *newcomm = c;
    return ncclSuccess;
}

ZN_API(ncclResult_t, ncclCommSplit, ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
       ncclConfig_t *config)
{
    ZN_CHECK(zn_comm_check(comm, "ncclCommSplit"));
    if (!newcomm) return zn_error(ncclInvalidArgument, ZN_INIT, "ncclCommSplit: newcomm is NULL");
    *newcomm = NULL;
    if (color < 0 && color != NCCL_SPLIT_NOCOLOR)
        return zn_error(ncclInvalidArgument, ZN_INIT,
                        "ncclCommSplit: invalid color %d (must be >= 0 or NCCL_SPLIT_NOCOLOR)",
                        color);
    ncclResult_t st = (ncclResult_t)atomic_load(&comm->async_err);
    /* A revoked communicator splits once quiescent, even if a collective tried on it since
     * then failed (ncclCommRevoke). */
    if (atomic_load(&comm->revoked) && st != ncclInProgress) st = ncclSuccess;
    if (st != ncclSuccess)
        return zn_error(st == ncclInProgress ? ncclInvalidUsage : st, ZN_INIT,
                        "ncclCommSplit: the parent communicator is %s",
                        st == ncclInProgress ? "still initialising" : "in an error state");
    ncclConfig_t cfg = comm->config;
    if (config) ZN_CHECK(zn_config_apply(config, &cfg));
    atomic_fetch_add(&comm->busy, 1);
    ncclResult_t res = split(comm, color, key, newcomm, &cfg);
    atomic_fetch_sub(&comm->busy, 1);
    if (res != ncclSuccess && res != ncclInProgress) zn_comm_save_error(comm);
    return res;
}
