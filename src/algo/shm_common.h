/* Helpers shared by the shared-memory arena algorithms (shm_direct, shm_rsag). */
#ifndef ZN_ALGO_SHM_COMMON_H
#define ZN_ALGO_SHM_COMMON_H

#include "algo.h"
#include "transport/shm_arena.h"

#include <math.h>

/* The call's signature: ranks that made different calls see different values. */
static inline uint64_t zn_shm_sig(const struct zn_coll_args *a)
{
    uint64_t h = 0xcbf29ce484222325ull;
    uint64_t f[5] = { (uint64_t)a->coll, (uint64_t)a->count, (uint64_t)a->dtype, (uint64_t)a->op,
                      (uint64_t)(int64_t)a->root };
    for (int i = 0; i < 5; i++) h = (h ^ f[i]) * 0x100000001b3ull;
    return h | 1;
}

/* One synchronisation among n ranks through the arena, in microseconds: a flag round trip
 * per tree level. (Ranks outnumbering cores slow every algorithm alike, so it is not counted.) */
static inline double zn_shm_sync_cost(int n)
{
    return zn_cost.shm_sync_us * (1.0 + log2((double)n));
}

/* Before writing our buffer for window seq: every rank finished reading it (window
 * seq - nbuf). */
static inline void zn_shm_wait_reuse(struct zn_round *r, const struct zn_arena *ar, uint64_t seq)
{
    if (seq <= (uint64_t)ar->nbuf) return;
    for (int j = 0; j < ar->nranks; j++)
        if (j != ar->rank) zn_round_wait(r, j, ZN_ARENA_DONE, seq - (uint64_t)ar->nbuf, 0);
}

#endif
