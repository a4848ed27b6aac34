#include "group.h"
#include "rma.h"
#include "util/clock.h"
#include "util/param.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct group {
    int depth;
    ncclResult_t err;
    struct zn_gop *ops;
    int nops, cap;
};
static _Thread_local struct group grp;

int zn_group_depth(void)
{
    return grp.depth;
}

void zn_group_set_error(ncclResult_t err)
{
    if (grp.depth > 0 && grp.err == ncclSuccess) grp.err = err;
}

/* Drop what is queued (deferred calls free their arguments). */
static void group_clear(void)
{
    for (int i = 0; i < grp.nops; i++)
        if (grp.ops && (grp.ops[i].kind == ZN_GOP_DEFER || grp.ops[i].kind == ZN_GOP_RMA))
            grp.ops[i].fn(grp.ops[i].arg, 0);
    free(grp.ops);
    grp.ops = NULL;
    grp.nops = grp.cap = 0;
    grp.err = ncclSuccess;
}

/* --- running collectives and point-to-point operations ------------------------------------ */

/* Mark each communicator of the group busy (delta 1) or idle again (-1), and note for the
 * state dump what it runs: its first operation of the group and how many it has. */
static void comms_enter(struct zn_gop *ops, int n, int delta)
{
    int64_t now = delta > 0 ? zn_now_ns() : 0;
    for (int i = 0; i < n; i++) {
        struct ncclComm *c = ops[i].comm;
        int first = 1;
        for (int j = 0; j < i && first; j++) first = ops[j].comm != c;
        if (!first) continue;
        atomic_fetch_add(&c->busy, delta);
        if (delta < 0) {
            atomic_store_explicit(&c->call_start_ns, 0, memory_order_relaxed);
            continue;
        }
        int nops = 0;
        for (int j = i; j < n; j++) nops += ops[j].comm == c;
        atomic_store_explicit(&c->call_kind, (int)ops[i].kind, memory_order_relaxed);
        atomic_store_explicit(&c->call_coll, (int)ops[i].a.coll, memory_order_relaxed);
        atomic_store_explicit(&c->call_peer,
                              ops[i].kind == ZN_GOP_COLL ? ops[i].a.root : ops[i].a.peer,
                              memory_order_relaxed);
        atomic_store_explicit(&c->call_count, ops[i].a.count, memory_order_relaxed);
        atomic_store_explicit(&c->call_nops, nops, memory_order_relaxed);
        atomic_fetch_add_explicit(&c->ncalls, (unsigned long long)nops, memory_order_relaxed);
        atomic_store_explicit(&c->call_start_ns, now, memory_order_release);
    }
}

/* The host communicators' operations of a group, run to completion here. */
static ncclResult_t run_ops(struct zn_gop *ops, int n)
{
    if (n <= 0) return ncclSuccess;
    /* A single call (the common case) needs no allocation. */
    struct zn_task one_task, *one_ptr;
    struct zn_task *tasks = n == 1 ? &one_task : calloc((size_t)n, sizeof(*tasks));
    struct zn_task **ptrs = n == 1 ? &one_ptr : calloc((size_t)n, sizeof(*ptrs));
    if (!tasks || !ptrs) {
        if (n > 1) {
            free(tasks);
            free(ptrs);
        }
        return zn_error(ncclSystemError, ZN_COLL, "out of memory for %d operations", n);
    }
    if (n == 1) memset(&one_task, 0, sizeof(one_task));
    for (int i = 0; i < n; i++) {
        struct zn_task *t = &tasks[i];
        t->kind = ops[i].kind == ZN_GOP_COLL   ? ZN_TASK_COLL
                  : ops[i].kind == ZN_GOP_SEND ? ZN_TASK_SEND
                                               : ZN_TASK_RECV;
        t->ecomm = &ops[i].comm->exec;
        t->a = ops[i].a;
        t->op = ops[i].op;
        /* Collectives of one communicator run in call order. */
        if (t->kind == ZN_TASK_COLL)
            for (int j = i - 1; j >= 0; j--)
                if (tasks[j].kind == ZN_TASK_COLL && ops[j].comm == ops[i].comm) {
                    t->dep = &tasks[j];
                    break;
                }
        ptrs[i] = t;
    }
    ncclResult_t res = zn_exec_run(ptrs, n);
    if (res != ncclSuccess) {
        /* A communicator whose operation did not finish is out of step with its peers. */
        for (int i = 0; i < n; i++)
            if (!tasks[i].done || tasks[i].err != ncclSuccess) zn_comm_set_error(ops[i].comm, res);
    }
    for (int i = 0; i < n; i++) zn_task_release(&tasks[i]);
    if (n > 1) {
        free(tasks);
        free(ptrs);
    }
    return res;
}

/* One-sided operations (rma.c) run apart: before and after the others. */
static int host_op(const struct zn_gop *op)
{
    return op->comm->kind == ZN_COMM_HOST && op->kind != ZN_GOP_RMA;
}

static ncclResult_t run_host_ops(struct zn_gop *ops, int n)
{
    int nh = 0;
    for (int i = 0; i < n; i++) nh += host_op(&ops[i]);
    if (nh == n) return run_ops(ops, n);
    if (nh == 0) return ncclSuccess;
    struct zn_gop *h = malloc((size_t)nh * sizeof(*h));
    if (!h) return zn_error(ncclSystemError, ZN_CALL, "out of memory");
    for (int i = 0, k = 0; i < n; i++)
        if (host_op(&ops[i])) h[k++] = ops[i];
    ncclResult_t res = run_ops(h, nh);
    free(h);
    return res;
}

/* The cuda communicators' operations: each communicator's share launched on its streams. */
static ncclResult_t run_cuda_ops(struct zn_gop *ops, int n)
{
    struct zn_cuda_op stack[8], *co = NULL;
    for (int i = 0; i < n; i++) {
        struct ncclComm *c = ops[i].comm;
        if (c->kind != ZN_COMM_CUDA || ops[i].kind == ZN_GOP_RMA) continue;
        int first = 1;
        for (int j = 0; j < i && first; j++) first = ops[j].comm != c || ops[j].kind == ZN_GOP_RMA;
        if (!first) continue;
        const char *why = zn_cuda_failure(&c->cuda);
        if (why) {
            ncclResult_t r = zn_error(ncclRemoteError, ZN_COLL, "%s", why);
            zn_comm_set_error(c, r);
            return r;
        }
        int m = 0;
        for (int j = i; j < n; j++) m += ops[j].comm == c && ops[j].kind != ZN_GOP_RMA;
        co = m <= 8 ? stack : malloc((size_t)m * sizeof(*co));
        if (!co) return zn_error(ncclSystemError, ZN_CALL, "out of memory");
        for (int j = i, k = 0; j < n; j++) {
            if (ops[j].comm != c || ops[j].kind == ZN_GOP_RMA) continue;
            co[k++] = (struct zn_cuda_op){ .kind = ops[j].kind == ZN_GOP_COLL   ? ZN_CUDA_COLL
                                                   : ops[j].kind == ZN_GOP_SEND ? ZN_CUDA_SEND
                                                                                : ZN_CUDA_RECV,
                                           .a = ops[j].a,
                                           .op = ops[j].op,
                                           .scalar_dev = ops[j].scalar_dev,
                                           .stream = ops[j].stream };
        }
        ncclResult_t r = zn_cuda_launch(&c->cuda, co, m);
        if (co != stack) free(co);
        if (r != ncclSuccess) {
            zn_comm_set_error(c, r);
            return r;
        }
    }
    return ncclSuccess;
}

/* --- deferred communicator inits ------------------------------------------------------------ */

static ncclResult_t run_inits(struct zn_gop *ops, int n)
{
    ncclResult_t res = ncclSuccess;
    int nonblocking = 0;
    for (int i = 0; i < n; i++) {
        ncclResult_t r = zn_comm_setup_async(ops[i].comm, &ops[i].join);
        if (r != ncclSuccess) {
            zn_comm_set_error(ops[i].comm, r);
            atomic_store(&ops[i].comm->async_err, r);
            if (res == ncclSuccess) res = r;
        }
        nonblocking |= !ops[i].comm->config.blocking;
    }
    if (nonblocking) return res == ncclSuccess ? ncclInProgress : res;
    for (int i = 0; i < n; i++) {
        zn_comm_wait_setup(ops[i].comm);
        ncclResult_t r = (ncclResult_t)atomic_load(&ops[i].comm->async_err);
        if (r != ncclSuccess && res == ncclSuccess) {
            res = r;
            zn_set_last_error(ops[i].comm->last_error);
        }
    }
    return res;
}

/* --- deferred management calls ----------------------------------------------------------- */

/* The deferred calls of one communicator, run in call order on one thread (they are
 * collectives over the same bootstrap: never two at once). */
struct defer_job {
    struct zn_gop *ops;
    int n;
    struct ncclComm *comm;
    int own_thread;
    ncclResult_t res;
    char msg[ZN_ERRMSG_MAX];
};

static void *defer_thread(void *p)
{
    struct defer_job *j = p;
    j->res = ncclSuccess;
    /* On a thread of its own: the calls find their communicator's device current and bound
     * (the driver's calls fail on a thread without a context; see zn_cuda_enter). */
    if (j->comm->kind == ZN_COMM_CUDA && j->own_thread) zn_cuda_enter(j->comm->cuda_dev);
    for (int i = 0; i < j->n; i++) {
        struct zn_gop *op = &j->ops[i];
        if (op->kind != ZN_GOP_DEFER || op->comm != j->comm) continue;
        if (j->res != ncclSuccess) {
            op->fn(op->arg, 0);
            continue;
        }
        j->res = op->fn(op->arg, 1);
        if (j->res != ncclSuccess) snprintf(j->msg, sizeof(j->msg), "%s", zn_last_error());
    }
    return NULL;
}

/* Run the group's deferred calls and remove them from ops; *n becomes the count of the
 * others. Each communicator's calls run in order on a thread of their own, all communicators
 * at once (inline when there is one). The first error wins and is this thread's last error
 * (each was logged where it happened). */
static ncclResult_t run_deferred(struct zn_gop *ops, int *n)
{
    int ncomm = 0, keep = 0;
    for (int i = 0; i < *n; i++) {
        if (ops[i].kind != ZN_GOP_DEFER) continue;
        int first = 1;
        for (int j = 0; j < i && first; j++)
            first = !(ops[j].kind == ZN_GOP_DEFER && ops[j].comm == ops[i].comm);
        ncomm += first;
    }
    if (ncomm == 0) return ncclSuccess;
    struct defer_job *jobs = calloc((size_t)ncomm, sizeof(*jobs));
    pthread_t *tids = calloc((size_t)ncomm, sizeof(*tids));
    int *started = calloc((size_t)ncomm, sizeof(*started));
    ncclResult_t res = ncclSuccess;
    if (!jobs || !tids || !started) {
        res = zn_error(ncclSystemError, ZN_CALL, "out of memory for grouped calls");
        for (int i = 0; i < *n; i++)
            if (ops[i].kind == ZN_GOP_DEFER) ops[i].fn(ops[i].arg, 0);
    }
    int k = 0;
    for (int i = 0; res == ncclSuccess && i < *n; i++) {
        if (ops[i].kind != ZN_GOP_DEFER) continue;
        int first = 1;
        for (int j = 0; j < k && first; j++) first = jobs[j].comm != ops[i].comm;
        if (!first) continue;
        jobs[k] = (struct defer_job){ .ops = ops, .n = *n, .comm = ops[i].comm };
        jobs[k].own_thread = ncomm > 1;
        if (ncomm == 1)
            defer_thread(&jobs[k]);
        else if (pthread_create(&tids[k], NULL, defer_thread, &jobs[k]) == 0)
            started[k] = 1;
        else { /* here, then: it may wait for a peer's call until ZINC_TIMEOUT, but it ends */
            jobs[k].own_thread = 0;
            defer_thread(&jobs[k]);
        }
        k++;
    }
    for (int j = 0; j < k; j++) {
        if (started[j]) pthread_join(tids[j], NULL);
        if (res == ncclSuccess && jobs[j].res != ncclSuccess) {
            res = jobs[j].res;
            zn_set_last_error(jobs[j].msg);
        }
    }
    for (int i = 0; i < *n; i++)
        if (ops[i].kind != ZN_GOP_DEFER) ops[keep++] = ops[i];
    *n = keep;
    free(jobs);
    free(tids);
    free(started);
    return res;
}

ncclResult_t zn_group_defer(struct ncclComm *comm, zn_defer_fn fn, void *arg)
{
    struct zn_gop op = { .kind = ZN_GOP_DEFER, .comm = comm, .fn = fn, .arg = arg };
    if (grp.depth == 0) return fn(arg, 1);
    if (grp.nops == grp.cap) {
        int cap = grp.cap ? grp.cap * 2 : 16;
        struct zn_gop *n = realloc(grp.ops, (size_t)cap * sizeof(*n));
        if (!n) {
            fn(arg, 0);
            zn_group_set_error(ncclSystemError);
            return zn_error(ncclSystemError, ZN_CALL, "out of memory queueing a group call");
        }
        grp.ops = n;
        grp.cap = cap;
    }
    grp.ops[grp.nops++] = op;
    return ncclSuccess;
}

static ncclResult_t run_ops_of_group(struct zn_gop *ops, int n);

/* The one-sided operations' arguments go with the group (whether they ran or not). */
static ncclResult_t run_group(struct zn_gop *ops, int n)
{
    ncclResult_t dres = run_deferred(ops, &n);
    ncclResult_t res = dres != ncclSuccess || n == 0 ? dres : run_ops_of_group(ops, n);
    for (int i = 0; i < n; i++)
        if (ops[i].kind == ZN_GOP_RMA) ops[i].fn(ops[i].arg, 0);
    return res;
}

static ncclResult_t run_ops_of_group(struct zn_gop *ops, int n)
{
    int ninit = 0;
    for (int i = 0; i < n; i++) ninit += ops[i].kind == ZN_GOP_INIT;
    if (ninit && ninit != n)
        return zn_error(ncclInvalidUsage, ZN_CALL,
                        "a group may hold communicator inits or operations, not both");
    if (ninit) return run_inits(ops, n);
    /* The communicators stay busy until the error is saved on them: ncclCommAbort on another
     * thread waits for that before it frees them. */
    comms_enter(ops, n, 1);
    ncclResult_t res = ncclSuccess;
    for (int i = 0; i < n && res == ncclSuccess; i++) {
        ncclResult_t st = (ncclResult_t)atomic_load(&ops[i].comm->async_err);
        if (ops[i].comm->magic != ZN_COMM_MAGIC) /* a kept shell (util/handle.h) */
            res = zn_error(ncclInvalidArgument, ZN_CALL,
                           "communicator %p was destroyed while a call on it was queued in the "
                           "group",
                           (void *)ops[i].comm);
        else if (atomic_load(&ops[i].comm->revoked))
            res = zn_error(ncclInvalidUsage, ZN_CALL,
                           "communicator %p was revoked (ncclCommRevoke): it only accepts "
                           "ncclCommDestroy, ncclCommSplit and ncclCommShrink",
                           (void *)ops[i].comm);
        else if (atomic_load(&ops[i].comm->suspended)) /* since the call: same group, or racing */
            res = zn_error(ncclInvalidUsage, ZN_CALL,
                           "communicator %p is suspended (ncclCommSuspend): call ncclCommResume "
                           "first",
                           (void *)ops[i].comm);
        else if (st == ncclInProgress)
            res = zn_error(ncclInvalidUsage, ZN_CALL,
                           "communicator %p is still initialising (non-blocking init): wait for "
                           "ncclCommGetAsyncError to return ncclSuccess",
                           (void *)ops[i].comm);
        else if (st != ncclSuccess)
            res = zn_error(st, ZN_CALL,
                           "communicator %p failed earlier and cannot run operations (%s)",
                           (void *)ops[i].comm, ops[i].comm->last_error);
    }
    /* A group's one-sided puts and signals first and its waits last: its operations may
     * complete in any order, and this order cannot deadlock a group that signals a peer and
     * waits for it (rma.c). */
    if (res == ncclSuccess) res = zn_rma_run(ops, n, 0);
    if (res == ncclSuccess) res = run_cuda_ops(ops, n);
    if (res == ncclSuccess) res = run_host_ops(ops, n);
    if (res == ncclSuccess) res = zn_rma_run(ops, n, 1);
    if (res != ncclSuccess)
        for (int i = 0; i < n; i++) zn_comm_save_error(ops[i].comm);
    comms_enter(ops, n, -1);
    return res;
}

ncclResult_t zn_group_submit(const struct zn_gop *op)
{
    if (grp.depth == 0) {
        struct zn_gop copy = *op;
        return run_group(&copy, 1);
    }
    if (grp.nops == grp.cap) {
        int cap = grp.cap ? grp.cap * 2 : 16;
        struct zn_gop *n = realloc(grp.ops, (size_t)cap * sizeof(*n));
        if (!n) {
            zn_group_set_error(ncclSystemError);
            return zn_error(ncclSystemError, ZN_CALL, "out of memory queueing a group call");
        }
        grp.ops = n;
        grp.cap = cap;
    }
    grp.ops[grp.nops++] = *op;
    return ncclSuccess;
}

ZN_API(ncclResult_t, ncclGroupStart, void)
{
    zn_params();
    grp.depth++;
    return ncclSuccess;
}

ZN_API(ncclResult_t, ncclGroupEnd, void)
{
    zn_params(); /* configures logging: this may be the process's first call */
    if (grp.depth == 0)
        return zn_error(ncclInvalidUsage, ZN_CALL,
                        "ncclGroupEnd called without a matching ncclGroupStart");
    if (--grp.depth > 0) return ncclSuccess;
    ncclResult_t res = grp.err;
    if (res != ncclSuccess) {
        /* An argument error inside the group: nothing was issued, every communicator stays
         * usable. Restore the message of that error (later calls may have overwritten it). */
        for (int i = 0; i < grp.nops; i++) {
            if (grp.ops[i].kind == ZN_GOP_INIT) zn_comm_set_error(grp.ops[i].comm, res);
        }
        group_clear();
        return res;
    }
    struct zn_gop *ops = grp.ops;
    int n = grp.nops;
    grp.ops = NULL;
    group_clear();
    if (n > 0) res = run_group(ops, n);
    free(ops);
    return res;
}

ZN_API(ncclResult_t, ncclGroupSimulateEnd, ncclSimInfo_t *simInfo)
{
    if (!simInfo || simInfo->magic != 0x74685283)
        return zn_error(ncclInvalidArgument, ZN_CALL,
                        "ncclGroupSimulateEnd: simInfo is NULL or not initialised with "
                        "NCCL_SIM_INFO_INITIALIZER");
    if (grp.depth == 0)
        return zn_error(ncclInvalidUsage, ZN_CALL,
                        "ncclGroupSimulateEnd called without a matching ncclGroupStart");
    if (--grp.depth > 0) return ncclSuccess;
    double us = 0;
    for (int i = 0; i < grp.nops; i++) {
        struct zn_gop *op = &grp.ops[i];
        if (op->kind == ZN_GOP_INIT || op->kind == ZN_GOP_DEFER || op->kind == ZN_GOP_RMA ||
            atomic_load(&op->comm->async_err) != ncclSuccess)
            continue;
        if (op->kind == ZN_GOP_COLL) {
            const struct zn_algo *a =
                zn_algo_select(&op->comm->actx, &op->a, op->comm->exec.force_algo);
            if (a) us += a->cost(&op->comm->actx, &op->a);
        } else {
            us += zn_cost_msg(&op->comm->actx, op->a.count * op->a.esize);
        }
    }
    ncclResult_t res = grp.err;
    group_clear();
    simInfo->estimatedTime = (float)us;
    return res;
}
