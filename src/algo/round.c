/* Round builders. The executor allocates rounds with the capacities below, so a builder never
 * runs out of room for a correct algorithm; overflowing is a bug, caught by an assert. */
#include "algo.h"

#include <assert.h>

int zn_round_step_capacity(int nranks)
{
    return 4 * nranks + 16;
}

int zn_round_src_capacity(int nranks)
{
    return 2 * nranks + 8;
}

void zn_round_reset(struct zn_round *r)
{
    r->nstep = 0;
    r->nsrcs = 0;
}

static struct zn_step *add(struct zn_round *r, int kind)
{
    assert(r->nstep < r->cap && "round capacity exceeded: algorithm bug");
    struct zn_step *s = &r->step[r->nstep++];
    *s = (struct zn_step){ .kind = (uint8_t)kind, .peer = -1 };
    return s;
}

void zn_round_send(struct zn_round *r, int peer, const void *buf, size_t bytes)
{
    struct zn_step *s = add(r, ZN_STEP_SEND);
    s->peer = peer;
    s->src = buf;
    s->n = bytes;
}

void zn_round_recv(struct zn_round *r, int peer, void *buf, size_t bytes)
{
    struct zn_step *s = add(r, ZN_STEP_RECV);
    s->peer = peer;
    s->dst = buf;
    s->n = bytes;
}

void zn_round_copy(struct zn_round *r, void *dst, const void *src, size_t bytes)
{
    if (bytes == 0 || dst == src) return;
    struct zn_step *s = add(r, ZN_STEP_COPY);
    s->dst = dst;
    s->src = src;
    s->n = bytes;
}

const void **zn_round_srcs(struct zn_round *r, int nsrc)
{
    assert(r->nsrcs + nsrc <= r->srcs_cap && "round source capacity exceeded: algorithm bug");
    const void **p = &r->srcs[r->nsrcs];
    r->nsrcs += nsrc;
    return p;
}

void zn_round_reduce_n(struct zn_round *r, void *dst, const void **srcs, int nsrc, size_t n)
{
    if (n == 0) return;
    struct zn_step *s = add(r, ZN_STEP_REDUCE);
    s->dst = dst;
    s->srcs = srcs;
    s->nsrc = nsrc;
    s->n = n;
}

void zn_round_reduce2(struct zn_round *r, void *dst, const void *a, const void *b, size_t n)
{
    const void **srcs = zn_round_srcs(r, 2);
    srcs[0] = a;
    srcs[1] = b;
    zn_round_reduce_n(r, dst, srcs, 2, n);
}

void zn_round_wait(struct zn_round *r, int lrank, int ctr, uint64_t value, uint64_t sig)
{
    struct zn_step *s = add(r, ZN_STEP_WAIT);
    s->peer = lrank;
    s->ctr = (uint8_t)ctr;
    s->value = value;
    s->sig = sig;
}

void zn_round_post(struct zn_round *r, int ctr, uint64_t value, uint64_t sig)
{
    struct zn_step *s = add(r, ZN_STEP_POST);
    s->ctr = (uint8_t)ctr;
    s->value = value;
    s->sig = sig;
}
