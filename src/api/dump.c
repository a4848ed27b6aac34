/*
 * The state dump of communicators (ZINC_PROXY_DUMP_SIGNAL, util/dump.h): one block per live
 * communicator of the process, host ones included. Runs on the dump thread while the
 * communicators' own threads go on (or hang, which is when this is read): it only reads words
 * those threads write, and the tables setup made before the communicator became ready.
 */
#include "group.h"
#include "util/clock.h"

#include <stdio.h>
#include <string.h>

static const char *result_name(int r)
{
    return r == ncclInProgress ? "initialising" : ncclGetErrorString((ncclResult_t)r);
}

/* What the communicator runs now, if anything. */
static void dump_call(const struct ncclComm *c, int64_t now)
{
    int64_t start = atomic_load_explicit(&c->call_start_ns, memory_order_acquire);
    unsigned long long n = atomic_load_explicit(&c->ncalls, memory_order_relaxed);
    if (!start) {
        zn_warn(ZN_INIT, "state dump:  idle; %llu operations issued", n);
        return;
    }
    int kind = atomic_load_explicit(&c->call_kind, memory_order_relaxed);
    int coll = atomic_load_explicit(&c->call_coll, memory_order_relaxed);
    int peer = atomic_load_explicit(&c->call_peer, memory_order_relaxed);
    int nops = atomic_load_explicit(&c->call_nops, memory_order_relaxed);
    size_t count = atomic_load_explicit(&c->call_count, memory_order_relaxed);
    char what[96];
    if (kind == ZN_GOP_SEND || kind == ZN_GOP_RECV)
        snprintf(what, sizeof(what), "%s of %zu elements %s rank %d",
                 kind == ZN_GOP_SEND ? "send" : "recv", count, kind == ZN_GOP_SEND ? "to" : "from",
                 peer);
    else if (kind == ZN_GOP_RMA)
        snprintf(what, sizeof(what), "one-sided operations (the first with rank %d)", peer);
    else
        snprintf(what, sizeof(what), "%s of count %zu (root %d)", zn_coll_name((enum zn_coll)coll),
                 count, peer);
    zn_warn(ZN_INIT,
            "state dump:  pending: %s%s, running for %.3f s (operation %llu of this "
            "communicator)",
            what, nops > 1 ? " and the rest of its group" : "", (double)(now - start) / 1e9,
            n - (unsigned long long)nops + 1);
    if (nops > 1) zn_warn(ZN_INIT, "state dump:  the group has %d operations", nops);
}

/* Which transport serves each peer, as runs of ranks ("1-3 shm, 4 net"). */
static void dump_peers(const struct ncclComm *c)
{
    char line[512] = "";
    size_t o = 0;
    for (int r = 0; r < c->nranks && o < sizeof(line); r++) {
        if (r == c->rank) continue;
        const struct zn_transport_ops *t = zn_conns_transport(c->conns, r);
        int last = r; /* the run of ranks with the same transport that starts at r */
        while (last + 1 < c->nranks && last + 1 != c->rank &&
               zn_conns_transport(c->conns, last + 1) == t)
            last++;
        int n = last > r ? snprintf(line + o, sizeof(line) - o, "%s%d-%d %s", o ? ", " : "", r,
                                    last, t ? t->name : "?")
                         : snprintf(line + o, sizeof(line) - o, "%s%d %s", o ? ", " : "", r,
                                    t ? t->name : "?");
        if (n < 0) break;
        o += (size_t)n;
        r = last;
    }
    zn_warn(ZN_INIT, "state dump:  peers by transport: %s", o ? line : "none");
}

static void dump_comm(void *obj, void *arg)
{
    const struct ncclComm *c = obj;
    int64_t now = *(const int64_t *)arg;
    int st = atomic_load(&c->async_err);
    char dev[32] = "";
    if (c->kind == ZN_COMM_CUDA) snprintf(dev, sizeof(dev), " on device %d", c->cuda_dev);
    zn_warn(ZN_INIT,
            "state dump: comm %p rank %d of %d, %s%s, hash %016llx: %s%s%s%s, %d calls inside "
            "it",
            (const void *)c, c->rank, c->nranks, c->kind == ZN_COMM_HOST ? "host" : "cuda", dev,
            (unsigned long long)c->comm_hash, result_name(st),
            atomic_load(&c->abort_flag) ? ", aborting" : "",
            atomic_load(&c->revoked) ? ", revoked" : "", c->finalized ? ", finalized" : "",
            atomic_load(&c->busy));
    if (st != ncclSuccess && st != ncclInProgress) {
        struct ncclComm *w = (struct ncclComm *)c; /* the lock, not the communicator, changes */
        pthread_mutex_lock(&w->err_lock);
        if (c->last_error[0]) zn_warn(ZN_INIT, "state dump:  error: %s", c->last_error);
        pthread_mutex_unlock(&w->err_lock);
    }
    if (st != ncclSuccess) return; /* the tables below are made by setup */
    zn_warn(ZN_INIT, "state dump:  %d host(s), %d local rank(s), %s", c->nhosts, c->nlocal,
            c->arena ? "shared-memory arena" : "no arena");
    dump_call(c, now);
    if (c->conns) dump_peers(c);
}

void zn_comm_dump_all(void *arg)
{
    (void)arg;
    int64_t now = zn_now_ns();
    zn_handle_each(&zn_comm_pool, dump_comm, &now);
}
