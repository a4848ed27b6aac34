/* The simulator's engine (see sim.h). */
#include "sim.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct rank_state {
    struct zn_algo_ctx ctx;
    struct zn_plan plan;
    struct zn_round round;
    unsigned char *done;
    uint64_t *seq; /* SEND/RECV: FIFO sequence number for the (src, dst) pair */
    void *scratch;
    long nround; /* rounds run so far */
    int loaded, finished, pending;
};

struct sim {
    const struct zn_algo *algo;
    int n;
    struct rank_state *rs;
    const struct sim_mem *mem;
    uint64_t *nsend, *nrecv; /* posted, per (src * n + dst) */
    struct sim_stats *stats;
};

static const char *kind_name(int k)
{
    static const char *names[] = { "SEND", "RECV", "WAIT", "COPY", "REDUCE", "POST" };
    return k >= 0 && k <= ZN_STEP_POST ? names[k] : "?";
}

static void print_step(const struct sim *s, int r, int i)
{
    const struct rank_state *x = &s->rs[r];
    const struct zn_step *st = &x->round.step[i];
    fprintf(stderr, "    rank %d round %ld step %d: %-6s peer %d n %zu seq %" PRIu64 " %s\n", r,
            x->nround, i, kind_name(st->kind), (int)st->peer, st->n,
            st->kind <= ZN_STEP_RECV ? x->seq[i] : 0, x->done[i] ? "done" : "pending");
}

static void print_round(const struct sim *s, int r)
{
    for (int i = 0; i < s->rs[r].round.nstep; i++) print_step(s, r, i);
}

static int inside(const void *p, size_t len, const void *base, size_t blen)
{
    if (!base || !p) return 0;
    uintptr_t a = (uintptr_t)p, b = (uintptr_t)base;
    return a >= b && len <= blen && a - b <= blen - len;
}

static int overlap(const void *p, size_t plen, const void *q, size_t qlen)
{
    uintptr_t a = (uintptr_t)p, b = (uintptr_t)q;
    return plen && qlen && a < b + qlen && b < a + plen;
}

static int readable(const struct sim *s, int r, const void *p, size_t len)
{
    const struct sim_mem *m = &s->mem[r];
    const struct rank_state *x = &s->rs[r];
    return inside(p, len, m->rd, m->rd_bytes) || inside(p, len, m->wr, m->wr_bytes) ||
           inside(p, len, x->scratch, x->plan.scratch_size);
}

static int writable(const struct sim *s, int r, const void *p, size_t len)
{
    const struct sim_mem *m = &s->mem[r];
    const struct rank_state *x = &s->rs[r];
    return inside(p, len, m->wr, m->wr_bytes) || inside(p, len, x->scratch, x->plan.scratch_size);
}

#define BAD(...)                                                                                  \
    do {                                                                                          \
        fprintf(stderr, "  sim: %s rank %d round %ld step %d: ", s->algo->name, r, x->nround, i); \
        fprintf(stderr, __VA_ARGS__);                                                             \
        fprintf(stderr, "\n");                                                                    \
        print_round(s, r);                                                                        \
        return -1;                                                                                \
    } while (0)

/* Checks a freshly generated round and posts its messages. */
static int load_round(struct sim *s, int r)
{
    struct rank_state *x = &s->rs[r];
    struct zn_round *rd = &x->round;
    size_t es = x->plan.a.esize;
    int i = -1, n = s->n;
    if (rd->nstep == 0) BAD("empty round");
    if (rd->nstep > s->stats->max_steps) s->stats->max_steps = rd->nstep;
    x->pending = 0;
    for (i = 0; i < rd->nstep; i++) {
        const struct zn_step *st = &rd->step[i];
        x->done[i] = 0;
        switch (st->kind) {
        case ZN_STEP_SEND:
        case ZN_STEP_RECV:
            if (st->peer < 0 || st->peer >= n || st->peer == r) BAD("bad peer %d", st->peer);
            if (st->n == 0) BAD("zero-byte message");
            if (st->kind == ZN_STEP_SEND) {
                if (!readable(s, r, st->src, st->n)) BAD("SEND reads outside the buffers");
                x->seq[i] = s->nsend[r * n + st->peer]++;
            } else {
                if (!writable(s, r, st->dst, st->n)) BAD("RECV writes outside the output");
                x->seq[i] = s->nrecv[st->peer * n + r]++;
            }
            x->pending++;
            break;
        case ZN_STEP_COPY:
            if (!readable(s, r, st->src, st->n)) BAD("COPY reads outside the buffers");
            if (!writable(s, r, st->dst, st->n)) BAD("COPY writes outside the output");
            if (overlap(st->src, st->n, st->dst, st->n)) BAD("COPY overlaps itself");
            break;
        case ZN_STEP_REDUCE:
            if (st->nsrc < 1 || !st->srcs) BAD("REDUCE without sources");
            if (!writable(s, r, st->dst, st->n * es)) BAD("REDUCE writes outside the output");
            for (int j = 0; j < st->nsrc; j++) {
                if (!readable(s, r, st->srcs[j], st->n * es)) BAD("REDUCE source %d outside", j);
                if (st->srcs[j] != st->dst && overlap(st->srcs[j], st->n * es, st->dst, st->n * es))
                    BAD("REDUCE source %d overlaps dst partially", j);
            }
            break;
        default: BAD("%s step in a point-to-point algorithm", kind_name(st->kind));
        }
    }
    /* A RECV may land while any other message of the round is in flight. */
    for (i = 0; i < rd->nstep; i++) {
        const struct zn_step *a = &rd->step[i];
        if (a->kind != ZN_STEP_RECV) continue;
        for (int j = 0; j < rd->nstep; j++) {
            const struct zn_step *b = &rd->step[j];
            if (j == i || b->kind > ZN_STEP_RECV) continue;
            const void *q = b->kind == ZN_STEP_SEND ? b->src : b->dst;
            if (overlap(a->dst, a->n, q, b->n)) BAD("RECV overlaps step %d of the same round", j);
        }
    }
    x->loaded = 1;
    return 0;
}

static int run_compute(struct sim *s, int r)
{
    struct rank_state *x = &s->rs[r];
    const struct zn_coll_args *a = &x->plan.a;
    for (int i = 0; i < x->round.nstep; i++) {
        const struct zn_step *st = &x->round.step[i];
        if (st->kind == ZN_STEP_COPY) memcpy(st->dst, st->src, st->n);
        if (st->kind == ZN_STEP_REDUCE)
            zn_reduce_n(a->dtype, a->op, st->dst, st->srcs, (int)st->nsrc, st->n);
    }
    x->loaded = 0;
    x->nround++;
    s->stats->rounds++;
    return 0;
}

/* Matches rank r's pending SENDs with the receivers' posted RECVs; returns matches or -1. */
static int match_sends(struct sim *s, int r)
{
    struct rank_state *x = &s->rs[r];
    int progress = 0;
    for (int i = 0; i < x->round.nstep; i++) {
        const struct zn_step *st = &x->round.step[i];
        if (st->kind != ZN_STEP_SEND || x->done[i]) continue;
        struct rank_state *y = &s->rs[st->peer];
        if (!y->loaded) continue;
        for (int j = 0; j < y->round.nstep; j++) {
            const struct zn_step *rv = &y->round.step[j];
            if (rv->kind != ZN_STEP_RECV || rv->peer != r || y->done[j] || y->seq[j] != x->seq[i])
                continue;
            if (rv->n != st->n) {
                fprintf(stderr,
                        "  sim: %s message %d -> %d #%" PRIu64 ": %zu bytes sent, %zu "
                        "expected\n",
                        s->algo->name, r, (int)st->peer, x->seq[i], st->n, rv->n);
                print_round(s, r);
                print_round(s, st->peer);
                return -1;
            }
            memcpy(rv->dst, st->src, st->n);
            x->done[i] = y->done[j] = 1;
            x->pending--;
            y->pending--;
            s->stats->msgs++;
            progress++;
            break;
        }
    }
    return progress;
}

/* One pass over the ranks in the order given; returns progress made or -1. */
static int pass(struct sim *s, const int *order)
{
    int progress = 0;
    for (int k = 0; k < s->n; k++) {
        int r = order[k];
        struct rank_state *x = &s->rs[r];
        if (x->finished) continue;
        if (!x->loaded) {
            zn_round_reset(&x->round);
            int more = s->algo->next(&x->plan, &x->round);
            progress++;
            if (!more) {
                if (x->round.nstep) {
                    fprintf(stderr, "  sim: %s rank %d: next() returned 0 with %d steps\n",
                            s->algo->name, r, x->round.nstep);
                    return -1;
                }
                x->finished = 1;
                continue;
            }
            if (load_round(s, r)) return -1;
        }
        int m = match_sends(s, r);
        if (m < 0) return -1;
        progress += m;
        if (x->pending == 0) {
            run_compute(s, r);
            progress++;
        }
    }
    /* A rank whose RECVs were all matched by later ranks of this pass finishes its round in the
     * next pass; that is progress too, and was counted at the match. */
    return progress;
}

int sim_run(const struct zn_algo *algo, int n, const int *ring, int nhosts, size_t chunk,
            const struct zn_coll_args *args, const struct sim_mem *mem, struct sim_stats *stats)
{
    struct sim sim = { .algo = algo, .n = n, .mem = mem, .stats = stats };
    struct sim *s = &sim;
    int rc = -1, *order = calloc((size_t)n, sizeof(int));
    s->rs = calloc((size_t)n, sizeof(*s->rs));
    s->nsend = calloc((size_t)n * n, sizeof(uint64_t));
    s->nrecv = calloc((size_t)n * n, sizeof(uint64_t));
    int cap = zn_round_step_capacity(n), scap = zn_round_src_capacity(n);
    for (int r = 0; r < n; r++) {
        struct rank_state *x = &s->rs[r];
        x->ctx = (struct zn_algo_ctx){ .rank = r,
                                       .nranks = n,
                                       .nhosts = nhosts,
                                       .ring = ring,
                                       .chunk_size = chunk,
                                       .shm_transport = 1 };
        for (int i = 0; i < n; i++)
            if (ring[i] == r) x->ctx.ring_pos = i;
        x->round.cap = cap;
        x->round.step = calloc((size_t)cap, sizeof(struct zn_step));
        x->round.srcs_cap = scap;
        x->round.srcs = calloc((size_t)scap, sizeof(void *));
        x->done = calloc((size_t)cap, 1);
        x->seq = calloc((size_t)cap, sizeof(uint64_t));
    }
    for (int r = 0; r < n; r++) {
        struct rank_state *x = &s->rs[r];
        if (!algo->supports(&x->ctx, &args[r])) {
            fprintf(stderr, "  sim: %s does not support %s (rank %d)\n", algo->name,
                    zn_coll_name(args[r].coll), r);
            goto out;
        }
        size_t sb = algo->scratch(&x->ctx, &args[r]);
        x->scratch = sb ? malloc(sb) : NULL;
        if (sb) memset(x->scratch, 0xa5, sb); /* garbage, never zeros */
        x->plan = (struct zn_plan){
            .algo = algo, .ctx = &x->ctx, .a = args[r], .scratch = x->scratch, .scratch_size = sb
        };
        algo->start(&x->plan);
    }
    /* The order of the ranks in a pass changes from pass to pass (a fixed shuffle), so no
     * schedule passes only because of one lucky interleaving. */
    uint64_t rng = 0x9e3779b97f4a7c15ull ^ (uint64_t)n;
    for (;;) {
        for (int k = 0; k < n; k++) order[k] = k;
        for (int k = n - 1; k > 0; k--) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            int j = (int)((rng >> 33) % (uint64_t)(k + 1)), t = order[k];
            order[k] = order[j];
            order[j] = t;
        }
        int p = pass(s, order);
        if (p < 0) goto out;
        int unfinished = 0;
        for (int r = 0; r < n; r++) unfinished += !s->rs[r].finished;
        if (!unfinished) break;
        if (p == 0) {
            fprintf(stderr, "  sim: %s deadlock; stuck rounds:\n", algo->name);
            for (int r = 0; r < n; r++)
                if (s->rs[r].loaded) print_round(s, r);
            goto out;
        }
    }
    for (int i = 0; i < n * n; i++) {
        if (s->nsend[i] != s->nrecv[i]) {
            fprintf(stderr, "  sim: %s %d -> %d: %" PRIu64 " sends, %" PRIu64 " receives\n",
                    algo->name, i / n, i % n, s->nsend[i], s->nrecv[i]);
            goto out;
        }
    }
    rc = 0;
out:
    for (int r = 0; r < n; r++) {
        free(s->rs[r].round.step);
        free(s->rs[r].round.srcs);
        free(s->rs[r].done);
        free(s->rs[r].seq);
        free(s->rs[r].scratch);
    }
    free(s->rs);
    free(s->nsend);
    free(s->nrecv);
    free(order);
    return rc;
}
