/*
 * The proxy's progress thread: net operations in rings, and its clients (see progress.h).
 */
#include "progress.h"
#include "util/clock.h"
#include "util/err.h"
#include "util/log.h"
#include "util/param.h"
#include "util/thread.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct zn_proxy_ring {
    struct zn_proxy_netop *slot[ZN_PROXY_RING];
    _Atomic uint64_t head; /* written by the poster */
    _Atomic uint64_t tail; /* written by the progress thread */
    /* The progress thread's own: ops taken from the ring and not yet complete. */
    struct zn_proxy_netop **live;
    int nlive, cap;
    char name[48];
    struct zn_proxy_ring *next;
};

static struct {
    pthread_mutex_t lock; /* the ring list; held by the progress thread during a pass */
    struct zn_proxy_ring *rings;
    struct zn_proxy_progress_client *clients;
    pthread_t thread;
    int started;
    atomic_int stop;
    _Atomic int64_t last_progress_ns;
    uint64_t completed;
} np = { .lock = PTHREAD_MUTEX_INITIALIZER };

ncclResult_t zn_proxy_ring_create(const char *name, struct zn_proxy_ring **out)
{
    struct zn_proxy_ring *r = calloc(1, sizeof(*r));
    if (!r) return zn_error(ncclSystemError, ZN_PROXY, "out of memory");
    snprintf(r->name, sizeof(r->name), "%s", name);
    pthread_mutex_lock(&np.lock);
    r->next = np.rings;
    np.rings = r;
    pthread_mutex_unlock(&np.lock);
    *out = r;
    return ncclSuccess;
}

void zn_proxy_ring_destroy(struct zn_proxy_ring *r)
{
    if (!r) return;
    /* Under the lock the progress thread is between passes: it cannot be using r. */
    pthread_mutex_lock(&np.lock);
    for (struct zn_proxy_ring **p = &np.rings; *p; p = &(*p)->next)
        if (*p == r) {
            *p = r->next;
            break;
        }
    pthread_mutex_unlock(&np.lock);
    free(r->live);
    free(r);
}

void zn_proxy_progress_add(struct zn_proxy_progress_client *cl)
{
    pthread_mutex_lock(&np.lock);
    cl->next = np.clients;
    np.clients = cl;
    pthread_mutex_unlock(&np.lock);
}

void zn_proxy_progress_remove(struct zn_proxy_progress_client *cl)
{
    /* Under the lock the progress thread is between passes: cl is not running. */
    pthread_mutex_lock(&np.lock);
    for (struct zn_proxy_progress_client **p = &np.clients; *p; p = &(*p)->next)
        if (*p == cl) {
            *p = cl->next;
            break;
        }
    pthread_mutex_unlock(&np.lock);
}

int zn_proxy_net_post(struct zn_proxy_ring *r, struct zn_proxy_netop *op)
{
    uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
    if (h - atomic_load_explicit(&r->tail, memory_order_acquire) >= ZN_PROXY_RING) return -EAGAIN;
    atomic_store_explicit(&op->status, ZN_NETOP_POSTED, memory_order_relaxed);
    op->request = NULL;
    op->tests = 0;
    op->nbytes = 0;
    op->posted_ns = zn_now_ns();
    r->slot[h % ZN_PROXY_RING] = op;
    atomic_store_explicit(&r->head, h + 1, memory_order_release);
    return 0;
}

ncclResult_t zn_proxy_net_wait(struct zn_proxy_netop *op, int64_t deadline,
                               const atomic_int *abort_flag)
{
    int spins = 0;
    for (;;) {
        int st = zn_proxy_net_status(op);
        if (st == ZN_NETOP_DONE) return ncclSuccess;
        if (st == ZN_NETOP_ERROR) return op->result;
        if (abort_flag && atomic_load(abort_flag))
            return zn_error(ncclRemoteError, ZN_PROXY, "proxy: net %s aborted while waiting",
                            op->is_send ? "send" : "receive");
        if (zn_now_ns() > deadline)
            return zn_error(ncclRemoteError, ZN_PROXY,
                            "proxy: net %s of %zu bytes (tag %d) %s rank %d did not complete "
                            "within ZINC_TIMEOUT",
                            op->is_send ? "send" : "receive", op->size, op->tag,
                            op->is_send ? "to" : "from", op->peer);
        if (++spins > 1000) {
            struct timespec ts = { 0, 20000 };
            nanosleep(&ts, NULL);
        }
    }
}

/* Take what was posted to r into its live list. */
static int take_posted(struct zn_proxy_ring *r)
{
    uint64_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);
    uint64_t h = atomic_load_explicit(&r->head, memory_order_acquire);
    int took = 0;
    for (; t != h; t++, took++) {
        if (r->nlive == r->cap) {
            int cap = r->cap ? r->cap * 2 : 64;
            struct zn_proxy_netop **n = realloc(r->live, (size_t)cap * sizeof(*n));
            if (!n) break; /* left in the ring: taken on a later pass */
            r->live = n;
            r->cap = cap;
        }
        r->live[r->nlive++] = r->slot[t % ZN_PROXY_RING];
    }
    atomic_store_explicit(&r->tail, t, memory_order_release);
    return took;
}

static void finish(struct zn_proxy_netop *op, ncclResult_t res, size_t nbytes)
{
    op->result = res;
    op->nbytes = nbytes;
    atomic_store_explicit(&op->status, res == ncclSuccess ? ZN_NETOP_DONE : ZN_NETOP_ERROR,
                          memory_order_release);
    np.completed++;
}

/* Issue or test one op. Returns 1 when it left the live list's concern (done or failed). */
static int step(struct zn_proxy_netop *op, int *moved)
{
    ncclResult_t res;
    if (!op->request) {
        if (op->is_send) {
            res = op->net->isend(op->comm, op->data, op->size, op->tag, op->mhandle, NULL,
                                 &op->request);
        } else {
            size_t size = op->size;
            int tag = op->tag;
            res = op->net->irecv(op->comm, 1, &op->data, &size, &tag, &op->mhandle, NULL,
                                 &op->request);
        }
        if (res != ncclSuccess) return finish(op, res, 0), 1;
        if (!op->request) return 0; /* the net asks to retry later */
        atomic_store_explicit(&op->status, ZN_NETOP_ISSUED, memory_order_relaxed);
        *moved = 1;
    }
    int done = 0, size = 0;
    op->tests++;
    res = op->net->test(op->request, &done, &size);
    if (res != ncclSuccess) return finish(op, res, 0), 1;
    if (!done) return 0;
    *moved = 1;
    finish(op, ncclSuccess, (size_t)size);
    return 1;
}

static int pass(void)
{
    int moved = 0;
    pthread_mutex_lock(&np.lock);
    for (struct zn_proxy_ring *r = np.rings; r; r = r->next) {
        moved |= take_posted(r) > 0;
        for (int i = 0; i < r->nlive;) {
            if (step(r->live[i], &moved)) {
                /* Keep the order of the rest: a net matches receives in posting order. */
                memmove(&r->live[i], &r->live[i + 1], (size_t)(r->nlive - i - 1) * sizeof(void *));
                r->nlive--;
            } else {
                i++;
            }
        }
    }
    for (struct zn_proxy_progress_client *cl = np.clients; cl; cl = cl->next)
        moved |= cl->progress(cl->arg);
    int clients = np.clients != NULL;
    pthread_mutex_unlock(&np.lock);
    if (moved) atomic_store(&np.last_progress_ns, zn_now_ns());
    return moved ? 1 : clients ? -1 : 0;
}

static void *progress_main(void *arg)
{
    (void)arg;
    char cpus[256];
    const char *want = zn_params()->proxy_cpus;
    int err = zn_thread_spread(want, cpus, sizeof(cpus));
    if (err)
        zn_warn(ZN_PROXY,
                "proxy: cannot run the progress thread on %s%s: %s; it runs where the process "
                "does",
                *want ? "ZINC_PROXY_CPUS=" : "the CPUs the system allows", want, strerror(err));
    else
        zn_info(ZN_PROXY, "proxy: progress thread on CPUs %s", cpus);
    /* Named for top -H, gdb and tests/proxy/progress_affinity_test.c. */
    pthread_setname_np(pthread_self(), "zinc-progress");
    long nap_ns = 0;
    while (!atomic_load(&np.stop)) {
        int r = pass();
        if (r > 0) {
            nap_ns = 0;
            continue;
        }
        /* A client serves kernels, which can commit a slot at any moment: within 100 ms of
         * the last progress it is polled again at once, as NCCL's proxy does. */
        if (r < 0 && zn_now_ns() - atomic_load(&np.last_progress_ns) < 100000000) {
            sched_yield();
            continue;
        }
        /* Nothing moved: nap, longer each idle pass, up to 1 ms (50 us while clients are
         * attached: a kernel's doorbell or slot wants an answer soon). */
        long cap = r < 0 ? 50000 : 1000000;
        nap_ns = nap_ns ? (nap_ns * 2 > cap ? cap : nap_ns * 2) : 2000;
        struct timespec ts = { 0, nap_ns };
        nanosleep(&ts, NULL);
    }
    return NULL;
}

ncclResult_t zn_proxy_progress_start(void)
{
    atomic_store(&np.stop, 0);
    atomic_store(&np.last_progress_ns, zn_now_ns());
    if (pthread_create(&np.thread, NULL, progress_main, NULL) != 0)
        return zn_error(ncclSystemError, ZN_PROXY, "proxy: cannot start the progress thread");
    np.started = 1;
    return ncclSuccess;
}

void zn_proxy_progress_stop(void)
{
    if (!np.started) return;
    atomic_store(&np.stop, 1);
    pthread_join(np.thread, NULL);
    np.started = 0;
}

void zn_proxy_progress_dump(void)
{
    int64_t now = zn_now_ns();
    pthread_mutex_lock(&np.lock);
    zn_warn(ZN_PROXY, "proxy dump: net progress: %llu ops completed, last progress %.3f s ago",
            (unsigned long long)np.completed,
            (double)(now - atomic_load(&np.last_progress_ns)) / 1e9);
    for (struct zn_proxy_ring *r = np.rings; r; r = r->next) {
        uint64_t h = atomic_load(&r->head), t = atomic_load(&r->tail);
        zn_warn(ZN_PROXY, "proxy dump:  ring %s: %d ops in flight, %llu posted not yet taken",
                r->name, r->nlive, (unsigned long long)(h - t));
        for (int i = 0; i < r->nlive; i++) {
            const struct zn_proxy_netop *op = r->live[i];
            zn_warn(ZN_PROXY,
                    "proxy dump:   %s %s rank %d, tag %d, %zu bytes: %s, %u tests, posted "
                    "%.3f s ago",
                    op->is_send ? "send" : "recv", op->is_send ? "to" : "from", op->peer, op->tag,
                    op->size, op->request ? "issued" : "waiting for the net", op->tests,
                    (double)(now - op->posted_ns) / 1e9);
        }
    }
    for (struct zn_proxy_progress_client *cl = np.clients; cl; cl = cl->next)
        if (cl->dump) cl->dump(cl->arg);
    pthread_mutex_unlock(&np.lock);
}
