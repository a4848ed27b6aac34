/*
 * The FIFO consumer: turns the triggers kernels push (mscclppfifo.h) into copies, signals and
 * flushes on the connection's transport.
 *
 * It runs on zinc's per-process proxy (src/proxy): mscclppProxyLaunch holds the process's proxy
 * service and attaches the communicator as a client of its progress thread
 * (proxy/progress.h), which calls client_progress on every pass beside the other clients (the
 * GPU net engine of cuda communicators, posted net ops). zn_msc_proxy_progress handles at most
 * one trigger per call and does not wait for peers.
 */
#include "msc.h"
#include "proxy/progress.h"
#include "proxy/service.h"
#include "util/clock.h"
#include "util/cuda.h"
#include "util/err.h"

#include <stdlib.h>
#include <string.h>

struct msc_proxy {
    struct mscclppComm *comm;
    struct zn_proxy_progress_client client;
    int attached;       /* a client of the progress thread (and holding the proxy) */
    int stopped;        /* an error stopped it: the progress thread skips it */
    int has_net;        /* some connection is IB: progress zinc's nets too */
    uint64_t tail;      /* triggers consumed */
    int64_t checked_ns; /* last look at the peers */
    int gone;           /* connection whose peer exited, -1 if none (see check_peers) */
    int64_t served_ns;  /* when the last trigger was served (TRACE timing) */
    ncclResult_t error;
};

/* Handle one trigger if one is ready. *progressed = 1 if one was. */
static ncclResult_t proxy_poll(struct mscclppComm *c, struct msc_proxy *p, int *progressed);

ncclResult_t zn_msc_proxy_progress(struct mscclppComm *c, int *progressed)
{
    struct msc_proxy *p = c->proxy;
    if (!p) return ncclSuccess;
    if (p->has_net) {
        /* IB connections: post receives and move queued sends on, so that peers' puts land
         * while this rank's threads do other work. */
        zn_msc_net_progress(c);
        /* Kernels (GPU buffers) cannot see a connection's error: stop and abort their waits. */
        ncclResult_t res = c->fifo_host ? zn_msc_net_error(c) : ncclSuccess;
        if (res != ncclSuccess) return res;
    }
    return c->fifo_host ? proxy_poll(c, p, progressed) : ncclSuccess;
}

static ncclResult_t proxy_poll(struct mscclppComm *c, struct msc_proxy *p, int *progressed)
{
    volatile uint64_t *slot = c->fifo_host[p->tail % MSCCLPP_PROXY_FIFO_SIZE].value;
    uint64_t w0 = slot[0];
    if (w0 == 0) return ncclSuccess;
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    uint64_t w1 = slot[1];
    mscclppTrigger t = { .value = { w0, w1 } };
    int64_t t0 = zn_log_enabled(ZN_LOG_TRACE, ZN_PROXY) ? zn_now_ns() : 0;
    int i = (int)t.fields.connId;
    ncclResult_t res = ncclSuccess;
    int net = i < c->nsetup && c->host[i].transport == mscclppTransportIB;
    if (i >= c->nsetup || (c->host[i].transport != mscclppTransportP2P && !net))
        res = zn_error(ncclInvalidUsage, ZN_PROXY,
                       "proxy: a trigger names connection %d, which is not a set-up P2P or IB "
                       "connection (%d set up)",
                       i, c->nsetup);
    if (res == ncclSuccess && (t.fields.type & mscclppData)) {
        struct zn_msc_conn *h = &c->host[i];
        uint64_t dst = t.fields.dstDataOffset, src = t.fields.srcDataOffset, n = t.fields.dataSize;
        if (src > h->local_size || n > h->local_size - src || dst > h->remote_size ||
            n > h->remote_size - dst)
            res = zn_error(ncclInvalidArgument, ZN_PROXY,
                           "proxy: put to rank %d tag %d of %llu bytes from offset %llu to %llu "
                           "is outside the buffers (%llu here, %llu on the peer)",
                           h->remote_rank, h->tag, (unsigned long long)n, (unsigned long long)src,
                           (unsigned long long)dst, (unsigned long long)h->local_size,
                           (unsigned long long)h->remote_size);
        else if (!net)
            res = zn_msc_p2p_copy(c, i, dst, src, n);
    }
    if (res == ncclSuccess && net) {
        res = zn_msc_net_trigger(c, i, t.fields.type, t.fields.dstDataOffset,
                                 t.fields.srcDataOffset, t.fields.dataSize);
    } else {
        if (res == ncclSuccess && (t.fields.type & mscclppFlag))
            res = zn_msc_p2p_signal(c, i, t.value[1] >> ZINC_SIGNAL_SHIFT);
        if (res == ncclSuccess && (t.fields.type & mscclppSync)) res = zn_msc_p2p_sync(c, i);
    }
    if (t0) {
        int64_t t1 = zn_now_ns();
        zn_log(ZN_LOG_TRACE, ZN_PROXY,
               "proxy: trigger %llu (connection %d, type %d, %llu bytes) %.1f us after the "
               "last, served in %.1f us",
               (unsigned long long)p->tail, i, (int)t.fields.type,
               (unsigned long long)t.fields.dataSize, (double)(t0 - p->served_ns) / 1e3,
               (double)(t1 - t0) / 1e3);
        p->served_ns = t1;
    }
    slot[0] = 0;
    p->tail++;
    /* The GPU reads the tail over PCIe: publish it only every few triggers, and at once after
     * a flush, which a GPU thread waits on. */
    if ((t.fields.type & mscclppSync) || p->tail % MSCCLPP_PROXY_FIFO_FLUSH_COUNTER == 0)
        __atomic_store_n(c->tail_host, p->tail, __ATOMIC_RELEASE);
    *progressed = 1;
    return res;
}

/* A peer of a P2P connection that exited will never signal: the kernels waiting for it give up
 * (abort word). Whether that is a failure is mscclppProxyStop's to say: a peer that passed the
 * stop's barrier and left had finished its work (MSCCL++'s proxy stop is local, so a peer may
 * be gone before this rank's own stop returns), one that left before is not. So nothing is
 * logged here. Returns the connection whose peer exited, or -1. */
static int check_peers(struct mscclppComm *c)
{
    for (int i = 0; i < c->nsetup; i++) {
        /* An IB peer on another host that closed its connection: kernels waiting on it give
         * up (and record which connection); no error of the proxy's own, since a peer that
         * finished and destroyed its communicator closes the same way. */
        if (c->fifo_host && c->abort_word && zn_msc_net_closed(&c->host[i]))
            __atomic_store_n(c->abort_word, 1, __ATOMIC_RELEASE);
        if (c->host[i].transport == mscclppTransportSHM || !c->fifo_host ||
            !zn_peer_dead(c->watch, c->host[i].remote_rank))
            continue;
        return i;
    }
    return -1;
}

/* Make every device wait give up rather than spin until the deadline (P2P only: without one
 * there is no abort word and no kernel waiting). */
static void raise_abort(struct mscclppComm *c)
{
    if (c->abort_word) __atomic_store_n(c->abort_word, 1, __ATOMIC_RELEASE);
}

/* The progress thread's callback: up to a batch of triggers, the peers every millisecond. An
 * error stops this communicator's proxy (the others go on) and ends its kernels' waits. */
static int client_progress(void *arg)
{
    struct msc_proxy *p = arg;
    struct mscclppComm *c = p->comm;
    if (p->stopped) return 0;
    /* The copies run on the communicator's GPU, whatever the thread's device was (another
     * client may have set its own): set it only when it differs, as cudaSetDevice is no
     * cheap call to make on every pass. */
    if (c->cuda_dev >= 0 && zn_cuda_current_device() != c->cuda_dev &&
        zn_cuda_set_device(c->cuda_dev) != ncclSuccess) {
        p->error = ncclUnhandledCudaError;
        p->stopped = 1;
        raise_abort(c);
        return 0;
    }
    int moved = 0;
    for (int i = 0; i < 64; i++) {
        int progressed = 0;
        ncclResult_t res = zn_msc_proxy_progress(c, &progressed);
        if (res != ncclSuccess) {
            p->error = res;
            p->stopped = 1;
            raise_abort(c);
            return 1;
        }
        if (!progressed) break;
        moved = 1;
    }
    int64_t now = zn_now_ns();
    if (!moved && now - p->checked_ns > 1000000) {
        p->checked_ns = now;
        if ((p->gone = check_peers(c)) >= 0) {
            p->stopped = 1;
            raise_abort(c);
        }
    }
    return moved;
}

static void client_dump(void *arg)
{
    struct msc_proxy *p = arg;
    zn_warn(ZN_PROXY, "proxy dump:  mscclpp rank %d: %llu triggers served%s", p->comm->rank,
            (unsigned long long)p->tail, p->stopped ? ", stopped by an error" : "");
}

ZN_MSC_EXPORT mscclppResult_t mscclppProxyLaunch(mscclppComm_t comm)
{
    ncclResult_t r = zn_msc_comm_check(comm, "mscclppProxyLaunch");
    if (r != ncclSuccess) return zn_msc_res(r);
    if (comm->proxy)
        return zn_msc_res(
            zn_error(ncclInvalidUsage, ZN_PROXY, "mscclppProxyLaunch: the proxy runs already"));
    struct msc_proxy *p;
    ncclResult_t res = zn_calloc(&p, 1, "proxy");
    if (res != ncclSuccess) return zn_msc_res(res);
    p->comm = comm;
    p->gone = -1;
    /* A FIFO exists once a P2P connection or an IB one over a GPU buffer does. */
    int has_fifo = comm->fifo_host != NULL;
    for (int i = 0; i < comm->nsetup; i++)
        p->has_net |= comm->host[i].transport == mscclppTransportIB;
    /* SHM connections are driven by host threads: nothing to do without a P2P or IB one. */
    /* Published before the progress thread sees it: it reads comm->proxy. */
    comm->proxy = p;
    if ((has_fifo && comm->fifo_host) || p->has_net) {
        res = zn_proxy_acquire();
        if (res != ncclSuccess) {
            comm->proxy = NULL;
            free(p);
            return zn_msc_res(res);
        }
        p->client = (struct zn_proxy_progress_client){ .progress = client_progress,
                                                       .dump = client_dump,
                                                       .arg = p };
        zn_proxy_progress_add(&p->client);
        p->attached = 1;
    }
    return mscclppSuccess;
}

/* What the proxy or a device wait recorded. */
static ncclResult_t proxy_report(struct mscclppComm *c, struct msc_proxy *p)
{
    if (p->error != ncclSuccess) return p->error;
    if (p->gone >= 0) {
        char who[160];
        zn_peer_str(&c->tctx, c->host[p->gone].remote_rank, who, sizeof(who));
        return zn_error(ncclRemoteError, ZN_PROXY,
                        "proxy: %s (connection tag %d) exited before it reached mscclppProxyStop",
                        who, c->host[p->gone].tag);
    }
    ncclResult_t net = zn_msc_net_error(c);
    if (net != ncclSuccess) return net;
    uint32_t e = c->error_word ? __atomic_load_n(c->error_word, __ATOMIC_ACQUIRE) : 0;
    if (!e) return ncclSuccess;
    static const char *what[] = { "?", "found no free FIFO slot", "saw no flush complete",
                                  "saw no signal arrive" };
    uint32_t reason = e >> 16, conn = e & 0xffff;
    const char *w = reason < 4 ? what[reason] : "?";
    int peer = conn < (uint32_t)c->nconns ? c->host[conn].remote_rank : -1;
    int tag = conn < (uint32_t)c->nconns ? c->host[conn].tag : -1;
    return zn_error(ncclSystemError, ZN_PROXY,
                    "a kernel gave up waiting: it %s on the connection to rank %d tag %d within "
                    "ZINC_TIMEOUT, or after the proxy stopped",
                    w, peer, tag);
}

/* Detach from the progress thread (once this returns, client_progress does not run again) and
 * let go of the proxy. */
static void detach(struct msc_proxy *p)
{
    if (!p->attached) return;
    zn_proxy_progress_remove(&p->client);
    zn_proxy_release();
    p->attached = 0;
}

void zn_msc_proxy_free(struct mscclppComm *c)
{
    struct msc_proxy *p = c->proxy;
    if (!p) return;
    detach(p);
    free(p);
    c->proxy = NULL;
}

ZN_MSC_EXPORT mscclppResult_t mscclppProxyStop(mscclppComm_t comm)
{
    ncclResult_t r = zn_msc_comm_check(comm, "mscclppProxyStop");
    if (r != ncclSuccess) return zn_msc_res(r);
    struct msc_proxy *p = comm->proxy;
    if (!p)
        return zn_msc_res(zn_error(ncclInvalidUsage, ZN_PROXY, "mscclppProxyStop: no proxy runs"));
    /* The peers' kernels may still push triggers that this proxy serves (signals to them):
     * stop only once every rank got here. */
    ncclResult_t res = zn_boot_barrier(comm->boot);
    detach(p);
    /* Past the barrier every peer had finished its work: one that has left since is not a
     * failure (its exit may have stopped this proxy between the barrier and the detach). The
     * kernels had ended before this call, so the abort it raised ended no wait. */
    if (res == ncclSuccess && p->gone >= 0) {
        zn_info(ZN_PROXY, "proxy: rank %d left after the stop's barrier",
                comm->host[p->gone].remote_rank);
        p->gone = -1;
    }
    ncclResult_t rep = proxy_report(comm, p);
    zn_msc_proxy_free(comm);
    return zn_msc_res(rep != ncclSuccess ? rep : res);
}
