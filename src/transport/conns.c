#include "conns.h"
#include "util/err.h"
#include "util/param.h"

#include <stdlib.h>
#include <string.h>

/* The transports are zn_transports (transport/registry.c), in preference order. */
struct zn_conns {
    const struct zn_tctx *ctx;
    void *state[ZN_NTRANSPORTS];
    int *tidx; /* transport index per peer */
};

static int transport_allowed(const struct zn_transport_ops *t)
{
    const struct zn_params *p = zn_params();
    if (t == &zn_transport_shm)
        return !p->shm_disable && strcmp(p->transport, "socket") != 0 &&
               strcmp(p->transport, "net") != 0;
    return 1;
}

/* Which transport serves the pair (a, b): symmetric, so both sides agree. view is ctx with
 * any rank; allowed[t] is transport_allowed(transports[t]) (asked once, not per pair). */
static int pick(struct zn_tctx *view, const int *allowed, int a, int b)
{
    view->rank = a;
    for (int t = 0; t < ZN_NTRANSPORTS; t++)
        if (allowed[t] && zn_transports[t]->can_connect(view, b)) return t;
    return ZN_NTRANSPORTS - 1;
}

ncclResult_t zn_conns_create(const struct zn_tctx *ctx, struct zn_conns **out)
{
    struct zn_conns *c = calloc(1, sizeof(*c));
    if (!c || !(c->tidx = malloc((size_t)ctx->nranks * sizeof(int)))) {
        free(c);
        return zn_error(ncclSystemError, ZN_INIT, "out of memory");
    }
    c->ctx = ctx;
    for (int t = 0; t < ZN_NTRANSPORTS; t++) {
        ncclResult_t r = zn_transport_check(zn_transports[t]);
        if (r != ncclSuccess) {
            free(c->tidx);
            free(c);
            return r;
        }
    }
    /* A transport is initialised on every rank if any pair of the communicator uses it: its
     * init may be collective, so the decision must be the same everywhere. Comparing host
     * hashes pairwise is O(n^2) but only hash compares, once per communicator. */
    int used[ZN_NTRANSPORTS] = { 0 }, allowed[ZN_NTRANSPORTS], nallowed = 0;
    for (int t = 0; t < ZN_NTRANSPORTS; t++)
        nallowed += allowed[t] = transport_allowed(zn_transports[t]);
    struct zn_tctx view = *ctx;
    for (int p = 0; p < ctx->nranks; p++)
        c->tidx[p] = p == ctx->rank ? -1 : pick(&view, allowed, ctx->rank, p);
    /* The last transport serves when nothing else can: it may be used without being allowed. */
    int nused = 0, can_use = nallowed + !allowed[ZN_NTRANSPORTS - 1];
    for (int a = 0; a < ctx->nranks && nused < can_use; a++)
        for (int b = a + 1; b < ctx->nranks; b++) {
            int t = pick(&view, allowed, a, b);
            nused += !used[t];
            used[t] = 1;
        }
    ncclResult_t res = ncclSuccess;
    for (int t = 0; t < ZN_NTRANSPORTS; t++) {
        if (!used[t]) continue;
        ZN_CHECK_GOTO(zn_transports[t]->init(ctx, &c->state[t]), res, fail);
        zn_info(ZN_INIT, "transport %s initialised", zn_transports[t]->name);
    }
    *out = c;
    return ncclSuccess;
fail:
    zn_conns_destroy(c);
    return res;
}

ncclResult_t zn_conns_get(struct zn_conns *c, int peer, int channel, struct zn_conn **out)
{
    int t = c->tidx[peer];
    if (t < 0) return zn_error(ncclInternalError, ZN_NET, "no transport connects a rank to itself");
    return zn_transports[t]->connect(c->state[t], peer, channel, out);
}

const struct zn_transport_ops *zn_conns_transport(const struct zn_conns *c, int peer)
{
    return c->tidx[peer] < 0 ? NULL : zn_transports[c->tidx[peer]];
}

int zn_conns_uses_shm(const struct zn_conns *c)
{
    for (int p = 0; p < c->ctx->nranks; p++)
        if (c->tidx[p] >= 0 && zn_transports[c->tidx[p]] == &zn_transport_shm) return 1;
    return 0;
}

void zn_conns_abort(struct zn_conns *c, const char *msg)
{
    for (int t = 0; c && t < ZN_NTRANSPORTS; t++)
        if (c->state[t]) zn_transports[t]->abort(c->state[t], msg);
}

void zn_conns_destroy(struct zn_conns *c)
{
    if (!c) return;
    for (int t = 0; t < ZN_NTRANSPORTS; t++)
        if (c->state[t]) zn_transports[t]->fini(c->state[t]);
    free(c->tidx);
    free(c);
}
