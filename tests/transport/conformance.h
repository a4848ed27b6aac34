/*
 * The transport conformance suite's shared declarations: the per-rank environment, the
 * driver loop over a transport's ops table, payload patterns and the scenarios
 * (conformance_test.c has the overview).
 */
#ifndef ZN_TESTS_TRANSPORT_CONFORMANCE_H
#define ZN_TESTS_TRANSPORT_CONFORMANCE_H

#include "bootstrap/bootstrap.h"
#include "transport/transport.h"
#include "util/clock.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define MAXR 16
#define MB   (1024 * 1024)

/* One rank's environment. */
struct rank_env {
    int rank, nranks;
    const struct zn_transport_ops *ops;
    struct zn_boot *boot;
    struct zn_peer_info *peers;
    struct zn_tctx ctx;
    atomic_int abort_flag;
    const char *scenario;
};

extern struct rank_env *cur_env;

/* Print a failure with this rank, the scenario and the last error; returns -1. */
int fail_at(const char *file, int line, const char *cond, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* In a scenario: fail it (return -1) with a message unless cond holds. */
#define CHECK(cond, ...)                                                     \
    do {                                                                     \
        if (!(cond)) return fail_at(__FILE__, __LINE__, #cond, __VA_ARGS__); \
    } while (0)

#define SAY(...)                                                             \
    do {                                                                     \
        fprintf(stderr, "[rank %d] %s: ", cur_env->rank, cur_env->scenario); \
        fprintf(stderr, __VA_ARGS__);                                        \
        fprintf(stderr, "\n");                                               \
    } while (0)

static inline double now_s(void)
{
    return (double)zn_now_ns() * 1e-9;
}

/* Byte i of message msg from src to dst. */
void pattern_fill(void *buf, size_t len, int src, int dst, uint64_t msg);
/* The index of the first wrong byte, or (size_t)-1. */
size_t pattern_check(const void *buf, size_t len, int src, int dst, uint64_t msg);

/* A scenario's transport state: one ops->init, the connections made so far. */
struct sc {
    struct rank_env *e;
    void *state;
    struct zn_conn *conn[MAXR][ZN_NCHANNELS];
};

struct xfer {
    struct zn_req req;
    int send, peer, ch;
    uint64_t msg;
    size_t len;
    void *buf;
};

int sc_init(struct sc *s, struct rank_env *e);
void sc_fini(struct sc *s);
/* connect() and check what it returns (idempotence, the header). */
int sc_connect(struct sc *s, int peer, int ch);
/* Progress every connection once; the first error is returned, with its peer and channel. */
ncclResult_t sc_progress(struct sc *s, int *progressed, int *peer, int *ch);
/* Progress every connection for secs seconds; any error fails. */
int sc_progress_for(struct sc *s, double secs);

/* Set up a transfer; a send's buffer gets its pattern, a receive's a poison value. */
int xfer_make(struct xfer *x, int send, int me, int peer, int ch, uint64_t msg, size_t len);
int xfer_post(struct sc *s, struct xfer *x);
void xfers_free(struct xfer *x, int n);

typedef int (*sc_check_fn)(void *arg);
/* Progress until every transfer is done, then check the lengths and every received byte;
 * check() (if any) runs after every round. */
int sc_wait(struct sc *s, struct xfer *x, int n, double secs, sc_check_fn check, void *arg);

int barrier(struct rank_env *e);

/* Scenarios: 0 on success, -1 after reporting a failure. scenarios.c: */
int sc_pairs(struct rank_env *e);
int sc_small(struct rank_env *e);
int sc_duplex(struct rank_env *e);
int sc_mismatch(struct rank_env *e);
int sc_exit(struct rank_env *e);
int sc_perf(struct rank_env *e);
/* scenarios_caps.c: */
int sc_onesided(struct rank_env *e);
int sc_collmem(struct rank_env *e);
/* scenarios_net.c: */
int sc_stray(struct rank_env *e);
int sc_setup(struct rank_env *e);
/* scenarios_gpunet.c (the proxy's GPU net engine, host code standing in for the kernels): */
int sc_gpunet(struct rank_env *e);
int sc_gpunet_all(struct rank_env *e);
int sc_gpunet_slots(struct rank_env *e);
int sc_gpunet_gone(struct rank_env *e);
int sc_gpunet_abort(struct rank_env *e);
int sc_gpunet_gdr(struct rank_env *e);

#endif
