/*
 * Algorithms: how a collective is broken into communication and computation.
 *
 * An algorithm does not move data itself. It is a generator of *rounds*: the executor asks for
 * the next round, runs it, and asks again until the generator says the plan is finished.
 * A round has two parts, run in this order:
 *   1. waits: SEND / RECV steps (posted together, any order of completion) and WAIT steps
 *      (a counter of a rank's shared-memory arena slot reaching a value);
 *   2. local work, in order: COPY, REDUCE, POST (publish one of this rank's arena counters).
 * Rounds are generated lazily from a small per-plan state, so a plan for 2^31 elements needs
 * no more memory than one for 8.
 *
 * Keeping algorithms as pure generators means one executor handles deadlines, aborts and dead
 * peers for all of them, and tests/algo can run every algorithm for many ranks inside one
 * process (a simulator matches the sends and receives).
 *
 * Every algorithm is a `const struct zn_algo zn_algo_<name>` listed in the registry
 * (registry.c) with name, supports(), cost() (microseconds, the cost model), scratch(), start()
 * and next().
 */
#ifndef ZN_ALGO_H
#define ZN_ALGO_H

#include "algo/coll_facts.h"
#include "util/redop.h"
#include "nccl.h"

#include <stddef.h>
#include <stdint.h>

/* One collective call, as every rank sees it, or one send or receive (coll ZN_COLL_SEND or
 * ZN_COLL_RECV). count is NCCL's count argument: one block in coll_facts.h's terms, the whole
 * vector for allreduce/broadcast/reduce and per-rank blocks (sendcount, recvcount, count) for
 * allgather, reducescatter, alltoall, gather and scatter. op is already mapped:
 * ncclAvg and PreMulSum arrive as ZN_RED_SUM with pre-scaled input (see exec). */
struct zn_coll_args {
    enum zn_coll coll;
    const void *sendbuf;
    void *recvbuf;
    size_t count;
    ncclDataType_t dtype;
    size_t esize;
    enum zn_red op;
    union {
        int root; /* rooted collectives (broadcast, reduce, gather, scatter); -1 for the rest */
        int peer; /* send and receive: the other rank */
    };
};

struct zn_arena; /* transport/shm_arena.h */

/* What algorithms know about the communicator (filled by the layers above). */
struct zn_algo_ctx {
    int rank, nranks;
    int nhosts;
    const int *ring;        /* ranks in ring order, ranks of one host next to each other */
    int ring_pos;           /* where this rank is in ring[] */
    struct zn_arena *arena; /* shared-memory arena, or NULL when not every rank is local */
    size_t chunk_size;      /* pipelining unit of point-to-point algorithms (bytes) */
    int shm_transport;      /* 1 if same-host peers are connected by shm (cost model) */
};

enum zn_step_kind {
    ZN_STEP_SEND,   /* peer, src, n bytes */
    ZN_STEP_RECV,   /* peer, dst, n bytes */
    ZN_STEP_WAIT,   /* arena: counter ctr of local rank peer >= value (and signature sig) */
    ZN_STEP_COPY,   /* dst <- src, n bytes */
    ZN_STEP_REDUCE, /* dst <- srcs[0] op srcs[1] op ... (nsrc sources, n elements) */
    ZN_STEP_POST,   /* arena: this rank's counter ctr = value, with signature sig */
};

struct zn_step {
    uint8_t kind;
    uint8_t ctr;
    int32_t peer;
    int32_t nsrc;
    void *dst;
    const void *src;
    const void *const *srcs;
    size_t n;
    uint64_t value;
    uint64_t sig;
};

struct zn_round {
    int nstep, cap;
    struct zn_step *step;
    const void **srcs; /* pool for REDUCE sources */
    int nsrcs, srcs_cap;
};

/* Round builders: they never fail; the executor sizes rounds with zn_round_step_capacity()
 * and zn_round_src_capacity(). Steps carry no channel: a collective's steps all travel on the
 * collective channel (user send/recv use the other one). */
void zn_round_reset(struct zn_round *r);
void zn_round_send(struct zn_round *r, int peer, const void *buf, size_t bytes);
void zn_round_recv(struct zn_round *r, int peer, void *buf, size_t bytes);
void zn_round_copy(struct zn_round *r, void *dst, const void *src, size_t bytes);
/* dst <- a op b (n elements) */
void zn_round_reduce2(struct zn_round *r, void *dst, const void *a, const void *b, size_t n);
/* Reserve nsrc source slots; fill them, then call zn_round_reduce_n. */
const void **zn_round_srcs(struct zn_round *r, int nsrc);
void zn_round_reduce_n(struct zn_round *r, void *dst, const void **srcs, int nsrc, size_t n);
void zn_round_wait(struct zn_round *r, int lrank, int ctr, uint64_t value, uint64_t sig);
void zn_round_post(struct zn_round *r, int ctr, uint64_t value, uint64_t sig);

/* Steps and sources a round may hold for a communicator of nranks ranks. */
int zn_round_step_capacity(int nranks);
int zn_round_src_capacity(int nranks);

struct zn_plan {
    const struct zn_algo *algo;
    const struct zn_algo_ctx *ctx;
    struct zn_coll_args a;
    void *scratch; /* algo->scratch() bytes, given by the executor */
    size_t scratch_size;
    int64_t st[16]; /* the generator's state */
};

struct zn_algo {
    const char *name;
    const char *doc;
    int (*supports)(const struct zn_algo_ctx *ctx, const struct zn_coll_args *a);
    /* Estimated time in microseconds (the cost model compares these). */
    double (*cost)(const struct zn_algo_ctx *ctx, const struct zn_coll_args *a);
    size_t (*scratch)(const struct zn_algo_ctx *ctx, const struct zn_coll_args *a);
    void (*start)(struct zn_plan *p);
    /* Fill r (already reset) with the next round; return 0 when the plan is finished. */
    int (*next)(struct zn_plan *p, struct zn_round *r);
};

/* The next round of a plan whose rounds may be empty for this rank (short last pieces, ranks
 * that sit a step out): calls round() until it builds a round with steps (returns 1) or the
 * plan is finished (returns 0). Algorithms end next() with it. */
int zn_algo_next_nonempty(struct zn_plan *p, struct zn_round *r,
                          int (*round)(struct zn_plan *p, struct zn_round *r));

/* Registry: every built-in algorithm, in a fixed order. */
const struct zn_algo *const *zn_algo_list(int *count);
const struct zn_algo *zn_algo_find(const char *name);

/* The cost model: the cheapest algorithm that supports the call, or the one named by
 * `forced` (ZINC_ALGO) if it supports the call. Logs the choice under TUNE. NULL only if no
 * algorithm supports the call (a bug). */
const struct zn_algo *zn_algo_select(const struct zn_algo_ctx *ctx, const struct zn_coll_args *a,
                                     const char *forced);

/* Cost model constants (microseconds and bytes per microsecond), shared by the algorithms. */
struct zn_cost_params {
    double shm_sync_us; /* one flag round trip through shared memory */
    double shm_bw;      /* memory copy bandwidth, bytes/us */
    double reduce_bw;   /* reduction throughput, bytes/us of input consumed */
    double fifo_lat_us; /* one message over a point-to-point connection (shm fifo) */
    double fifo_bw;     /* bytes/us over a point-to-point connection (shm fifo) */
    double net_lat_us;  /* one message between hosts or over sockets */
    double net_bw;      /* bytes/us between hosts or over sockets */
};
extern const struct zn_cost_params zn_cost;

/* Latency and bandwidth of one point-to-point message on this communicator. */
double zn_cost_msg(const struct zn_algo_ctx *ctx, size_t bytes);

#endif
