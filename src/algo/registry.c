/* The algorithm registry and the cost model's selection. */
#include "algo.h"
#include "util/log.h"

#include <stdio.h>
#include <string.h>

/* Every built-in algorithm, in a fixed order (ties in cost go to the earlier one). */
#define ZN_ALGO_LIST(X) \
    X(shm_direct)       \
    X(shm_rsag)         \
    ZN_ALGO_LIST_P2P(X)

#ifndef ZN_ALGO_LIST_P2P
#define ZN_ALGO_LIST_P2P(X) X(ring) X(rd) X(tree) X(pairwise)
#endif

#define ZN_X(name) extern const struct zn_algo zn_algo_##name;
ZN_ALGO_LIST(ZN_X)
#undef ZN_X

static const struct zn_algo *const algos[] = {
#define ZN_X(name) &zn_algo_##name,
    ZN_ALGO_LIST(ZN_X)
#undef ZN_X
};

/* Calibrated on a 2-core x86 VM (2 ranks, quiet machine, zinc-perf), then rounded: what
 * matters is the order between algorithms, which these keep across sizes. */
const struct zn_cost_params zn_cost = {
    .shm_sync_us = 0.4,   /* one flag hand-off through the arena */
    .shm_bw = 20000.0,    /* memcpy into / out of the arena, bytes per us */
    .reduce_bw = 24000.0, /* reduction input consumed, bytes per us */
    .fifo_lat_us = 3.0,   /* one message through a shm fifo, executor round included */
    .fifo_bw = 5000.0,    /* shm fifo, bytes per us (copy in and copy out) */
    .net_lat_us = 25.0,   /* one message over TCP: a 2-rank exchange of 8 B through the
                             socket net on loopback takes 21-27 us (rd against ring,
                             2026-11-24); 10 made 2 hosts pick ring over rd at 512 KB, 20%
                             slower there */
    .net_bw = 2000.0,     /* TCP, bytes per us */
};

const struct zn_algo *const *zn_algo_list(int *count)
{
    *count = (int)(sizeof(algos) / sizeof(algos[0]));
    return algos;
}

const struct zn_algo *zn_algo_find(const char *name)
{
    for (size_t i = 0; i < sizeof(algos) / sizeof(algos[0]); i++)
        if (!strcmp(algos[i]->name, name)) return algos[i];
    return NULL;
}

int zn_algo_next_nonempty(struct zn_plan *p, struct zn_round *r,
                          int (*round)(struct zn_plan *p, struct zn_round *r))
{
    while (round(p, r))
        if (r->nstep) return 1;
    return 0;
}

double zn_cost_msg(const struct zn_algo_ctx *ctx, size_t bytes)
{
    if (ctx->nhosts == 1 && ctx->shm_transport)
        return zn_cost.fifo_lat_us + (double)bytes / zn_cost.fifo_bw;
    return zn_cost.net_lat_us + (double)bytes / zn_cost.net_bw;
}

const struct zn_algo *zn_algo_select(const struct zn_algo_ctx *ctx, const struct zn_coll_args *a,
                                     const char *forced)
{
    const struct zn_algo *best = NULL;
    double best_cost = 0;
    if (forced && *forced) {
        const struct zn_algo *f = zn_algo_find(forced);
        if (f && f->supports(ctx, a)) {
            best = f;
            best_cost = f->cost(ctx, a);
        } else {
            /* Not every algorithm implements every collective: fall back to the cost model
             * for the others and say so once per call at TUNE level. */
            zn_log(ZN_LOG_INFO, ZN_TUNE, "ZINC_ALGO=%s %s %s; using the cost model", forced,
                   f ? "does not support" : "is unknown for", zn_coll_name(a->coll));
        }
    }
    if (!best) {
        for (size_t i = 0; i < sizeof(algos) / sizeof(algos[0]); i++) {
            if (!algos[i]->supports(ctx, a)) continue;
            double c = algos[i]->cost(ctx, a);
            if (!best || c < best_cost) {
                best = algos[i];
                best_cost = c;
            }
        }
    }
    if (best)
        zn_log(ZN_LOG_INFO, ZN_TUNE, "%s count %zu type %d op %d root %d nranks %d: %s (%.2f us)",
               zn_coll_name(a->coll), a->count, (int)a->dtype, (int)a->op, a->root, ctx->nranks,
               best->name, best_cost);
    return best;
}
