#include "exec.h"
#include "reduce.h"
#include "util/clock.h"
#include "util/err.h"
#include "util/param.h"

#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void zn_exec_comm_fini(struct zn_exec_comm *ecomm)
{
    free(ecomm->scratch);
    ecomm->scratch = NULL;
    ecomm->scratch_size = 0;
    while (ecomm->free_rounds) {
        struct zn_round_mem *m = ecomm->free_rounds;
        ecomm->free_rounds = m->next;
        free(m);
    }
}

void zn_task_release(struct zn_task *t)
{
    if (t->mem) {
        t->mem->next = t->ecomm->free_rounds;
        t->ecomm->free_rounds = t->mem;
        t->mem = NULL;
    }
    free(t->tmp);
    t->tmp = NULL;
}

/* One allocation per round_mem, sized for the communicator (every task of a communicator gets
 * the same capacity, so any cached one fits). */
static ncclResult_t alloc_round(struct zn_task *t)
{
    struct zn_exec_comm *ecomm = t->ecomm;
    int n = ecomm->tctx->nranks;
    size_t cap = (size_t)zn_round_step_capacity(n), scap = (size_t)zn_round_src_capacity(n);
    struct zn_round_mem *m = ecomm->free_rounds;
    if (m) {
        ecomm->free_rounds = m->next;
    } else {
        size_t bytes =
            sizeof(*m) +
            cap * (sizeof(struct zn_step) + sizeof(struct zn_req) + sizeof(struct zn_conn *)) +
            scap * sizeof(void *);
        m = malloc(bytes);
        if (!m)
            return zn_error(ncclSystemError, ZN_COLL, "out of memory for a round of %zu steps",
                            cap);
        /* Order by alignment: requests and steps (8-byte fields) first. */
        m->reqs = (struct zn_req *)(m + 1);
        m->step = (struct zn_step *)(m->reqs + cap);
        m->conns = (struct zn_conn **)(m->step + cap);
        m->srcs = (const void **)(m->conns + cap);
    }
    t->mem = m;
    t->round.step = m->step;
    t->round.srcs = m->srcs;
    t->round.cap = (int)cap;
    t->round.srcs_cap = (int)scap;
    t->reqs = m->reqs;
    t->conns = m->conns;
    return ncclSuccess;
}

/* PreMulSum (and avg on floating types): scale this rank's input into a temporary first. */
static ncclResult_t prescale(struct zn_task *t)
{
    const struct zn_tctx *tc = t->ecomm->tctx;
    size_t bytes =
        zn_coll_send_elems(t->a.coll, t->a.count, tc->nranks, tc->rank == t->a.root) * t->a.esize;
    t->tmp = malloc(bytes ? bytes : 1);
    if (!t->tmp)
        return zn_error(ncclSystemError, ZN_COLL, "out of memory for %zu bytes of scaled input",
                        bytes);
    zn_scale(t->a.dtype, t->tmp, t->a.sendbuf, t->op.scalar, bytes / t->a.esize);
    t->a.sendbuf = t->tmp;
    return ncclSuccess;
}

static ncclResult_t start_coll(struct zn_task *t)
{
    struct zn_exec_comm *ecomm = t->ecomm;
    if (t->a.count == 0) {
        t->done = 1;
        return ncclSuccess;
    }
    if (t->op.premul) ZN_CHECK(prescale(t));
    const struct zn_algo *algo = zn_algo_select(ecomm->actx, &t->a, ecomm->force_algo);
    if (!algo)
        return zn_error(ncclInternalError, ZN_COLL, "no algorithm supports %s on %d ranks",
                        zn_coll_name(t->a.coll), ecomm->tctx->nranks);
    size_t need = algo->scratch(ecomm->actx, &t->a);
    if (need > ecomm->scratch_size) {
        void *s = realloc(ecomm->scratch, need);
        if (!s) return zn_error(ncclSystemError, ZN_COLL, "out of memory for %zu bytes", need);
        ecomm->scratch = s;
        ecomm->scratch_size = need;
    }
    ZN_CHECK(alloc_round(t));
    t->plan = (struct zn_plan){
        .algo = algo, .ctx = ecomm->actx, .a = t->a, .scratch = ecomm->scratch, .scratch_size = need
    };
    algo->start(&t->plan);
    return ncclSuccess;
}

static ncclResult_t start_p2p(struct zn_task *t)
{
    if (t->self_match) {
        /* Matched with the other half on this rank at group start: a local copy. */
        if (t->kind == ZN_TASK_RECV) {
            size_t bytes = t->a.count * t->a.esize;
            if (bytes && t->a.recvbuf != t->self_match->a.sendbuf)
                memcpy(t->a.recvbuf, t->self_match->a.sendbuf, bytes);
        }
        t->done = 1;
        return ncclSuccess;
    }
    ZN_CHECK(alloc_round(t));
    struct zn_round *r = &t->round;
    zn_round_reset(r);
    size_t bytes = t->a.count * t->a.esize;
    if (t->kind == ZN_TASK_SEND)
        zn_round_send(r, t->a.peer, t->a.sendbuf, bytes);
    else
        zn_round_recv(r, t->a.peer, t->a.recvbuf, bytes);
    t->round_active = 1;
    return ncclSuccess;
}

/* Integer ncclAvg: divide the sums in whatever this rank received. */
static void finish_coll(struct zn_task *t)
{
    const struct zn_coll_args *a = &t->a;
    int n = t->ecomm->tctx->nranks, me = t->ecomm->tctx->rank;
    size_t out = zn_coll_recv_elems(a->coll, a->count, n, me == a->root);
    if (t->op.post_div && out) zn_divide_int(a->dtype, a->recvbuf, a->recvbuf, n, out);
    t->done = 1;
}

static ncclResult_t post_round(struct zn_task *t)
{
    struct zn_exec_comm *ecomm = t->ecomm;
    int ch = t->kind == ZN_TASK_COLL ? ZN_CH_COLL : ZN_CH_P2P;
    for (int i = 0; i < t->round.nstep; i++) {
        struct zn_step *s = &t->round.step[i];
        if (s->kind != ZN_STEP_SEND && s->kind != ZN_STEP_RECV) continue;
        ZN_CHECK(zn_conns_get(ecomm->conns, s->peer, ch, &t->conns[i]));
        const struct zn_transport_ops *ops = zn_conn_ops(t->conns[i]);
        if (s->kind == ZN_STEP_SEND)
            ZN_CHECK(ops->isend(t->conns[i], s->src, s->n, &t->reqs[i]));
        else
            ZN_CHECK(ops->irecv(t->conns[i], s->dst, s->n, &t->reqs[i]));
    }
    t->posted = 1;
    return ncclSuccess;
}

static ncclResult_t mismatch(struct zn_task *t, int peer)
{
    char who[128];
    zn_peer_str(t->ecomm->tctx, peer, who, sizeof(who));
    return zn_error(ncclInvalidUsage, ZN_COLL,
                    "%s is running a different collective call than this rank's %s (count %zu, "
                    "type %d, root %d): every rank must make the same calls in the same order",
                    who, zn_coll_name(t->a.coll), t->a.count, (int)t->a.dtype, t->a.root);
}

/* Check the round's waits. Returns 1 when all are complete. */
static ncclResult_t round_waits_done(struct zn_task *t, int *all, int *progressed)
{
    *all = 1;
    for (int i = 0; i < t->round.nstep; i++) {
        struct zn_step *s = &t->round.step[i];
        if (s->kind == ZN_STEP_SEND || s->kind == ZN_STEP_RECV) {
            if (t->reqs[i].state == ZN_REQ_DONE) continue;
            ZN_CHECK(zn_conn_ops(t->conns[i])->progress(t->conns[i], progressed));
            if (t->reqs[i].state != ZN_REQ_DONE) *all = 0;
        } else if (s->kind == ZN_STEP_WAIT) {
            if (s->value == 0) continue;
            int rc = zn_arena_ready(t->ecomm->arena, s->peer, s->ctr, s->value, s->sig);
            if (rc < 0) return mismatch(t, s->peer);
            if (rc == 0) {
                *all = 0;
                continue;
            }
            s->value = 0; /* satisfied: do not look again */
            *progressed = 1;
        }
    }
    return ncclSuccess;
}

static void run_local(struct zn_task *t)
{
    for (int i = 0; i < t->round.nstep; i++) {
        const struct zn_step *s = &t->round.step[i];
        switch (s->kind) {
        case ZN_STEP_COPY: memcpy(s->dst, s->src, s->n); break;
        case ZN_STEP_REDUCE:
            zn_reduce_n(t->a.dtype, t->a.op, s->dst, s->srcs, s->nsrc, s->n);
            break;
        case ZN_STEP_POST: zn_arena_post(t->ecomm->arena, s->ctr, s->value, s->sig); break;
        default: break;
        }
    }
}

/* Advance one task as far as it goes without waiting. */
static ncclResult_t task_progress(struct zn_task *t, int *progressed)
{
    for (;;) {
        if (!t->round_active) {
            zn_round_reset(&t->round);
            if (!t->plan.algo->next(&t->plan, &t->round)) {
                finish_coll(t);
                *progressed = 1;
                return ncclSuccess;
            }
            t->round_active = 1;
            t->posted = 0;
        }
        if (!t->posted) {
            ZN_CHECK(post_round(t));
            *progressed = 1;
        }
        int all;
        ZN_CHECK(round_waits_done(t, &all, progressed));
        if (!all) return ncclSuccess;
        if (t->kind != ZN_TASK_COLL) {
            t->done = 1;
            *progressed = 1;
            return ncclSuccess;
        }
        run_local(t);
        t->round_active = 0;
        *progressed = 1;
    }
}

/* The peer a stalled task waits for (-1 if none is known). */
static int blocking_peer(const struct zn_task *t)
{
    for (int i = 0; t->round_active && i < t->round.nstep; i++) {
        const struct zn_step *s = &t->round.step[i];
        if ((s->kind == ZN_STEP_SEND || s->kind == ZN_STEP_RECV) && t->reqs[i].state != ZN_REQ_DONE)
            return s->peer;
        if (s->kind == ZN_STEP_WAIT && s->value != 0) return s->peer;
    }
    return -1;
}

static const char *task_name(const struct zn_task *t)
{
    return zn_coll_name(t->a.coll);
}

/* A task made no progress for a while: find out whether it ever can. */
static ncclResult_t check_stalled(struct zn_task *t, int64_t now)
{
    struct zn_exec_comm *ecomm = t->ecomm;
    char who[128], msg[600];
    if (ecomm->arena && zn_arena_aborted(ecomm->arena, msg, sizeof(msg)))
        return zn_error(ncclRemoteError, ZN_COLL, "%s failed: %s", task_name(t), msg);
    int peer = blocking_peer(t);
    if (peer >= 0 && zn_peer_dead(ecomm->watch, peer)) {
        /* The peer may have delivered everything and exited between our last look and this
         * check. Fail only after one more pass without progress: a dead process writes
         * nothing, so that pass is conclusive. */
        if (t->suspect != peer + 1) {
            t->suspect = peer + 1;
            return ncclSuccess;
        }
        zn_peer_str(ecomm->tctx, peer, who, sizeof(who));
        return zn_error(ncclRemoteError, ZN_COLL,
                        "%s exited or was killed while this rank was in %s", who, task_name(t));
    }
    if (now - t->last_progress > zn_timeout_ns()) {
        if (peer >= 0)
            zn_peer_str(ecomm->tctx, peer, who, sizeof(who));
        else
            snprintf(who, sizeof(who), "its peers");
        return zn_error(ncclRemoteError, ZN_COLL,
                        "%s made no progress for ZINC_TIMEOUT=%lld s waiting for %s", task_name(t),
                        (long long)(zn_timeout_ns() / 1000000000), who);
    }
    return ncclSuccess;
}

/* Pair sends to self with receives from self on the same communicator, in call order. */
static ncclResult_t match_self(struct zn_task **tasks, int n)
{
    for (int i = 0; i < n; i++) {
        struct zn_task *s = tasks[i];
        if (s->kind != ZN_TASK_SEND || s->a.peer != s->ecomm->tctx->rank) continue;
        for (int j = 0; j < n && !s->self_match; j++) {
            struct zn_task *r = tasks[j];
            if (r->kind == ZN_TASK_RECV && r->ecomm == s->ecomm &&
                r->a.peer == r->ecomm->tctx->rank && !r->self_match) {
                if (r->a.count * r->a.esize != s->a.count * s->a.esize)
                    return zn_error(ncclInvalidUsage, ZN_COLL,
                                    "send to self of %zu bytes but receive from self of %zu "
                                    "bytes in the same group",
                                    s->a.count * s->a.esize, r->a.count * r->a.esize);
                s->self_match = r;
                r->self_match = s;
            }
        }
    }
    for (int i = 0; i < n; i++) {
        struct zn_task *t = tasks[i];
        if (t->kind != ZN_TASK_COLL && t->a.peer == t->ecomm->tctx->rank && !t->self_match)
            return zn_error(ncclInvalidUsage, ZN_COLL,
                            "ncclSend/ncclRecv to self without the matching ncclRecv/ncclSend "
                            "to self in the same group");
    }
    return ncclSuccess;
}

/* How long a waiting thread spins before it yields (about 20 us of pause instructions): long
 * enough to catch a peer's answer in shared memory without a system call, short enough that a
 * peer sharing our core gets it back quickly. Yield at once when ranks outnumber cores, since
 * the rank we wait for then surely needs our core. */
static int spin_limit(const struct zn_task *t)
{
    int64_t p = zn_params()->spin;
    if (p >= 0) return (int)p;
    static long ncpu;
    if (!ncpu) ncpu = sysconf(_SC_NPROCESSORS_ONLN) > 0 ? sysconf(_SC_NPROCESSORS_ONLN) : 1;
    return t->ecomm->nlocal > ncpu ? 0 : 1000;
}

/* A long wait (a slow peer): sleep instead of burning the core. The nap doubles from 50 us up
 * to a cap that grows with how many ranks share each core: with hundreds of ranks on a few
 * cores, fixed 50 us naps alone are millions of wake-ups a second, and the few ranks with work
 * to do get no CPU (init + one allreduce of 512 ranks on 2 cores took seconds). The cap keeps
 * the host's wake-ups near one per 25 us per core. */
static void idle_nap(const struct zn_task *t, int64_t *nap_ns)
{
    static long ncpu;
    if (!ncpu) ncpu = sysconf(_SC_NPROCESSORS_ONLN) > 0 ? sysconf(_SC_NPROCESSORS_ONLN) : 1;
    int64_t cap = 25000ll * t->ecomm->nlocal / ncpu;
    if (cap < 50000) cap = 50000;
    if (cap > 20000000) cap = 20000000;
    *nap_ns = *nap_ns ? *nap_ns * 2 : 50000;
    if (*nap_ns > cap) *nap_ns = cap;
    struct timespec ts = { 0, (long)*nap_ns };
    nanosleep(&ts, NULL);
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* A task failed: its communicator is out of step with its peers from now on. Tell them why
 * (arena abort word, transports' abort), so that they fail with the original cause at once
 * instead of timing out or blaming this rank. */
static ncclResult_t fail_task(struct zn_task *t, ncclResult_t err)
{
    t->err = err;
    char msg[700];
    snprintf(msg, sizeof(msg), "rank %d: %s", t->ecomm->tctx->rank, zn_last_error());
    if (t->ecomm->arena) zn_arena_set_abort(t->ecomm->arena, err, msg);
    zn_conns_abort(t->ecomm->conns, msg);
    return err;
}

/* Liveness and deadline checks of the started tasks that made no progress in the pass that
 * ended at now. They cost a system call each: once a millisecond is enough. A task that waits
 * on a dead peer is checked even while other tasks of the group progress, so that they cannot
 * hold its failure back past the deadline. */
static ncclResult_t check_tasks(struct zn_task **tasks, int n, int64_t now, int64_t *last_check)
{
    if (now - *last_check <= 1000000) return ncclSuccess;
    *last_check = now;
    for (int i = 0; i < n; i++) {
        struct zn_task *t = tasks[i];
        if (t->done || !t->started || t->last_progress == now) continue;
        int suspected = t->suspect;
        ncclResult_t res = check_stalled(t, now);
        if (res != ncclSuccess) return fail_task(t, res);
        /* A new suspicion is confirmed after one more pass, not a millisecond later. */
        if (!suspected && t->suspect) *last_check = 0;
    }
    return ncclSuccess;
}

/*
 * Waves (config.maxP2pPeers = k). NCCL's send/recv schedule pairs, at step s, the send to
 * rank + s with the receive from rank - s; both ends of a message compute the same step from
 * their own ranks. A group's sends and receives of steps 1..k form wave 0, k+1..2k wave 1, and
 * so on (sends and receives to self: wave 0): a rank then works with at most k destinations
 * and k sources at once, and a wave starts when every earlier wave of its communicator is
 * done. Every rank takes the waves in the same order and each message is in the same wave at
 * both ends, so a wave whose messages are all posted completes: no rank waits for a partner
 * held back in an earlier wave that cannot finish.
 */
static int task_wave(const struct zn_task *t)
{
    const struct zn_exec_comm *e = t->ecomm;
    if (t->kind == ZN_TASK_COLL || e->max_peers <= 0) return 0;
    int n = e->tctx->nranks, me = e->tctx->rank, p = t->a.peer;
    int step = t->kind == ZN_TASK_SEND ? (p - me + n) % n : (me - p + n) % n;
    return step == 0 ? 0 : (step - 1) / e->max_peers;
}

/* The lowest wave of ecomm's sends and receives in the run that is not done. */
static void open_wave(struct zn_task **tasks, int n, struct zn_exec_comm *ecomm)
{
    int w = INT_MAX;
    for (int i = 0; i < n; i++)
        if (tasks[i]->ecomm == ecomm && tasks[i]->kind != ZN_TASK_COLL && !tasks[i]->done &&
            tasks[i]->wave < w)
            w = tasks[i]->wave;
    ecomm->wave_open = w;
}

ncclResult_t zn_exec_begin(struct zn_exec_run *r, struct zn_task **tasks, int n)
{
    ZN_CHECK(match_self(tasks, n));
    int64_t now = zn_now_ns();
    *r = (struct zn_exec_run){ .tasks = tasks, .n = n, .remaining = n, .last_check = now };
    int waves = 0;
    for (int i = 0; i < n; i++) {
        tasks[i]->last_progress = now;
        tasks[i]->wave = task_wave(tasks[i]);
        if (tasks[i]->wave > waves) waves = tasks[i]->wave;
    }
    if (waves)
        zn_trace(ZN_COLL, "the group's sends and receives run in %d waves (config.maxP2pPeers)",
                 waves + 1);
    for (int i = 0; i < n; i++) tasks[i]->ecomm->wave_open = waves ? -1 : INT_MAX;
    for (int i = 0; waves && i < n; i++)
        if (tasks[i]->ecomm->wave_open < 0) open_wave(tasks, n, tasks[i]->ecomm);
    return ncclSuccess;
}

ncclResult_t zn_exec_pass(struct zn_exec_run *r, int *progressed)
{
    struct zn_task **tasks = r->tasks;
    int n = r->n, any = 0;
    *progressed = 0;
    for (int i = 0; i < n; i++) {
        struct zn_task *t = tasks[i];
        if (t->done || (t->dep && !t->dep->done) || t->wave > t->ecomm->wave_open) continue;
        if (atomic_load_explicit(t->ecomm->abort_flag, memory_order_relaxed))
            return fail_task(t, zn_error(ncclInvalidUsage, ZN_COLL,
                                         "%s interrupted: the communicator was aborted "
                                         "(ncclCommAbort)",
                                         task_name(t)));
        int moved = 0;
        ncclResult_t res = ncclSuccess;
        if (!t->started) {
            t->started = 1;
            t->last_progress = zn_now_ns();
            res = t->kind == ZN_TASK_COLL ? start_coll(t) : start_p2p(t);
            moved = 1;
        }
        if (res == ncclSuccess && !t->done) res = task_progress(t, &moved);
        if (res != ncclSuccess) return fail_task(t, res);
        if (moved) {
            any = 1;
            t->suspect = 0;
            t->last_progress = 0; /* stamped below, once per pass */
        }
        if (t->done) {
            r->remaining--;
            if (t->kind != ZN_TASK_COLL && t->wave == t->ecomm->wave_open)
                open_wave(tasks, n, t->ecomm);
        }
    }
    if (!any) return ncclSuccess;
    *progressed = 1;
    int64_t now = zn_now_ns();
    for (int i = 0; i < n; i++)
        if (!tasks[i]->last_progress) tasks[i]->last_progress = now;
    return check_tasks(tasks, n, now, &r->last_check);
}

ncclResult_t zn_exec_check(struct zn_exec_run *r)
{
    return check_tasks(r->tasks, r->n, zn_now_ns(), &r->last_check);
}

ncclResult_t zn_exec_run(struct zn_task **tasks, int n)
{
    struct zn_exec_run r;
    ZN_CHECK(zn_exec_begin(&r, tasks, n));
    int64_t idle_since = zn_now_ns(), nap = 0;
    int spins = 0, spin = n ? spin_limit(tasks[0]) : 0;
    while (r.remaining > 0) {
        int any = 0;
        ZN_CHECK(zn_exec_pass(&r, &any));
        if (any) {
            idle_since = zn_now_ns();
            spins = 0;
            nap = 0;
            continue;
        }
        if (spins++ < spin) {
            cpu_relax();
            continue;
        }
        ZN_CHECK(zn_exec_check(&r));
        if (zn_now_ns() - idle_since < 2000000)
            sched_yield();
        else
            idle_nap(tasks[0], &nap);
    }
    return ncclSuccess;
}
