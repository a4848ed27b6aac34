/*
 * The point-to-point simulator: runs every rank's plan of one algorithm inside one process.
 *
 * Rounds come from the algorithm's next(), sized with zn_round_step_capacity() and
 * zn_round_src_capacity() as the executor sizes them. Messages match with rendezvous
 * semantics: a SEND completes only when the receiver has posted the matching RECV (the k-th
 * SEND from A to B matches the k-th RECV at B from A) in its current round; then the bytes are
 * copied. When every SEND/RECV of a round has completed, its COPY and REDUCE steps run in order
 * and next() is asked again. A full pass over the ranks without progress while a plan is
 * unfinished is a deadlock, reported with the stuck steps.
 *
 * Each round is also checked: no arena steps (WAIT/POST), no zero-byte or self messages, equal
 * lengths at both ends, every pointer inside the rank's own buffers (reads: input, output,
 * scratch; writes: output and scratch only), no RECV landing on memory that another message of
 * the same round reads or writes, no empty round.
 */
#ifndef ZN_TESTS_ALGO_SIM_H
#define ZN_TESTS_ALGO_SIM_H

#include "algo/algo.h"
#include "exec/reduce.h"

#include <stddef.h>

/* What a rank's steps may touch besides its scratch. */
struct sim_mem {
    const void *rd; /* the user's input: read only */
    size_t rd_bytes;
    void *wr; /* the user's output: read and write */
    size_t wr_bytes;
};

struct sim_stats {
    long rounds;    /* rounds run, all ranks */
    long msgs;      /* messages matched */
    long max_steps; /* most steps in one round */
};

/* Runs the plans of ranks 0..n-1 (args[r], mem[r]) with the given ring order and chunk size.
 * Returns 0, or -1 after printing what went wrong to stderr. */
int sim_run(const struct zn_algo *algo, int n, const int *ring, int nhosts, size_t chunk,
            const struct zn_coll_args *args, const struct sim_mem *mem, struct sim_stats *stats);

#endif
