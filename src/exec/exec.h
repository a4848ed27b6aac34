/*
 * The host executor: runs the tasks of a group (collectives and point-to-point operations, on
 * one or several communicators) to completion on the calling thread.
 *
 * Each collective task is an algorithm's plan (algo.h): the executor fetches a round, posts its
 * sends and receives on the transports, checks its arena waits, and once everything of the
 * round is complete runs its local work. All tasks advance together, round-robin, so sends and
 * receives in one group never deadlock on each other; collectives on the same communicator
 * run in call order (each depends on the previous one).
 *
 * Reliability lives here, once for every algorithm and transport: the abort flag, the
 * ZINC_TIMEOUT no-progress deadline (the error names the peer being waited for), and liveness
 * of same-host peers (a dead peer is reported by rank, host and pid at once).
 */
#ifndef ZN_EXEC_H
#define ZN_EXEC_H

#include "algo/algo.h"
#include "transport/conns.h"
#include "transport/peer.h"
#include "transport/shm_arena.h"

/* Round storage (steps, reduce sources, requests, connections) sized for a communicator:
 * kept on a per-communicator free list so that a call does not allocate. */
struct zn_round_mem {
    struct zn_step *step;
    const void **srcs;
    struct zn_req *reqs;
    struct zn_conn **conns;
    struct zn_round_mem *next;
};

/* The executor's view of a communicator (owned by the api layer). */
struct zn_exec_comm {
    const struct zn_tctx *tctx;
    struct zn_conns *conns;
    struct zn_arena *arena; /* NULL unless all ranks are on this host */
    struct zn_peer_watch *watch;
    const struct zn_algo_ctx *actx;
    const atomic_int *abort_flag;
    const char *force_algo; /* ZINC_ALGO or NULL */
    int nlocal;             /* ranks of this communicator on this host (spin policy) */
    /* config.maxP2pPeers: a group's sends and receives run in waves of this many steps of
     * NCCL's send/recv schedule (0: all at once; see exec.c) */
    int max_peers;
    int wave_open; /* executor state: the lowest wave with unfinished sends and receives */
    void *scratch;          /* grown on demand, freed by zn_exec_comm_fini */
    size_t scratch_size;
    struct zn_round_mem *free_rounds;
};
void zn_exec_comm_fini(struct zn_exec_comm *ecomm);

enum zn_task_kind { ZN_TASK_COLL, ZN_TASK_SEND, ZN_TASK_RECV };

/* How the user's op maps onto the algorithms' plain reductions. */
struct zn_op_desc {
    enum zn_red red;
    int premul;         /* multiply each rank's input by *scalar first (PreMulSum, float avg) */
    uint64_t scalar[1]; /* one element of the call's type, when premul */
    int post_div;       /* integer ncclAvg: divide the result by nranks at the end */
};

struct zn_task {
    enum zn_task_kind kind;
    struct zn_exec_comm *ecomm;
    struct zn_coll_args a; /* for SEND/RECV: sendbuf/recvbuf, count, dtype, peer */
    struct zn_op_desc op;
    struct zn_task *dep; /* must complete before this one starts */
    int wave;            /* SEND/RECV: starts once the earlier waves of its comm are done */

    /* executor state */
    int started, done;
    ncclResult_t err;
    struct zn_plan plan;
    struct zn_round round;
    int round_active, posted;
    struct zn_round_mem *mem;   /* backs round, reqs and conns */
    struct zn_req *reqs;        /* one per step of the round */
    struct zn_conn **conns;     /* the connection of each SEND/RECV step */
    void *tmp;                  /* pre-scaled input for premul */
    struct zn_task *self_match; /* send/recv to self: the matching task */
    int64_t last_progress;
    int suspect; /* 1 + a peer found dead while the task waited; confirmed by one more pass */
};

/* Run tasks to completion. On error, returns the first error; every task that did not finish
 * has done == 0 and the comms they belong to must be treated as failed. */
ncclResult_t zn_exec_run(struct zn_task **tasks, int ntasks);

/* The same, a pass at a time, for a caller that must not block (the proxy's progress thread
 * running staged operations beside other work): zn_exec_begin, then zn_exec_pass until
 * remaining is 0 (progressed says whether the pass moved anything), with zn_exec_check on
 * passes that did not (deadlines and dead peers, at most once a millisecond). Errors as
 * zn_exec_run's. */
struct zn_exec_run {
    struct zn_task **tasks;
    int n, remaining;
    int64_t last_check;
};
ncclResult_t zn_exec_begin(struct zn_exec_run *r, struct zn_task **tasks, int ntasks);
ncclResult_t zn_exec_pass(struct zn_exec_run *r, int *progressed);
ncclResult_t zn_exec_check(struct zn_exec_run *r);

/* Free what the executor attached to a task. */
void zn_task_release(struct zn_task *t);

#endif
