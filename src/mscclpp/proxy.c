/*
 * The FIFO consumer: turns the triggers kernels push (mscclppfifo.h) into copies, signals and
 * flushes on the connection's transport.
 *
 * zn_msc_proxy_progress handles at most one trigger per call and never blocks, so that it can run
 * as a callback of zinc's per-process proxy progress thread (src/proxy) once libmscclpp is
 * driven from there. TEMPORARY: until then mscclppProxyLaunch starts a thread of libmscclpp's
 * own that calls it in a loop (proxy_thread below); the README says so.
 */
#include "msc.h"
#include "util/cuda.h"
#include "util/err.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

struct msc_proxy {
    struct mscclppComm *comm;
    pthread_t thread;
    atomic_int stop;
    int running;
    int has_net;   /* some connection is IB: progress zinc's nets too */
    uint64_t tail; /* triggers consumed */
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
        pthread_mutex_lock(&c->net_lock);
        zn_msc_net_progress(c);
        pthread_mutex_unlock(&c->net_lock);
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
        if (res == ncclSuccess && (t.fields.type & mscclppFlag)) res = zn_msc_p2p_signal(c, i);
        if (res == ncclSuccess && (t.fields.type & mscclppSync)) res = zn_msc_p2p_sync(c);
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

/* A peer of a P2P connection (or an IB one, where kernels wait) that exited will never
 * signal: say so, so that the kernels waiting for it give up (abort word) and
 * mscclppProxyStop reports it. */
static ncclResult_t check_peers(struct mscclppComm *c)
{
    for (int i = 0; i < c->nsetup; i++) {
        int r = c->host[i].remote_rank;
        /* An IB peer on another host that closed its connection: kernels waiting on it give
         * up (and record which connection); no error of the proxy's own, since a peer that
         * finished and destroyed its communicator closes the same way. */
        if (c->fifo_host && c->abort_word && zn_msc_net_closed(&c->host[i]))
            __atomic_store_n(c->abort_word, 1, __ATOMIC_RELEASE);
        if (c->host[i].transport == mscclppTransportSHM || !c->fifo_host ||
            !zn_peer_dead(c->watch, r))
            continue;
        char who[160];
        zn_peer_str(&c->tctx, r, who, sizeof(who));
        return zn_error(ncclRemoteError, ZN_PROXY, "proxy: %s (connection tag %d) has exited", who,
                        c->host[i].tag);
    }
    return ncclSuccess;
}

/* Make every device wait give up rather than spin until the deadline (P2P only: without one
 * there is no abort word and no kernel waiting). */
static void raise_abort(struct mscclppComm *c)
{
    if (c->abort_word) __atomic_store_n(c->abort_word, 1, __ATOMIC_RELEASE);
}

static void *proxy_thread(void *arg)
{
    struct msc_proxy *p = arg;
    struct mscclppComm *c = p->comm;
    zn_log_rank = c->rank;
    /* The copies run on the communicator's GPU, whatever this new thread's default is. */
    if (c->cuda_dev >= 0 && zn_cuda_set_device(c->cuda_dev) != ncclSuccess) {
        p->error = ncclUnhandledCudaError;
        raise_abort(c);
        return NULL;
    }
    uint32_t idle = 0;
    while (!atomic_load(&p->stop)) {
        int progressed = 0;
        ncclResult_t res = zn_msc_proxy_progress(c, &progressed);
        if (res != ncclSuccess) {
            /* Make every device wait give up rather than spin until the deadline. */
            p->error = res;
            raise_abort(c);
            break;
        }
        if (!progressed && ++idle > 1024) {
            sched_yield();
            if ((idle & 1023) == 0 && (p->error = check_peers(c)) != ncclSuccess) {
                raise_abort(c);
                break;
            }
        } else if (progressed) {
            idle = 0;
        }
    }
    return NULL;
}

ZN_MSC_EXPORT mscclppResult_t mscclppProxyLaunch(mscclppComm_t comm)
{
    if (!comm)
        return zn_msc_res(
            zn_error(ncclInvalidArgument, ZN_PROXY, "mscclppProxyLaunch: comm is NULL"));
    if (comm->proxy)
        return zn_msc_res(
            zn_error(ncclInvalidUsage, ZN_PROXY, "mscclppProxyLaunch: the proxy runs already"));
    struct msc_proxy *p;
    ncclResult_t res = zn_calloc(&p, 1, "proxy");
    if (res != ncclSuccess) return zn_msc_res(res);
    p->comm = comm;
    /* A FIFO exists once a P2P connection or an IB one over a GPU buffer does. */
    int has_fifo = comm->fifo_host != NULL;
    for (int i = 0; i < comm->nsetup; i++)
        p->has_net |= comm->host[i].transport == mscclppTransportIB;
    /* SHM connections are driven by host threads: nothing to do without a P2P or IB one. */
    /* Published before the thread starts: it reads comm->proxy. */
    comm->proxy = p;
    if ((has_fifo && comm->fifo_host) || p->has_net) {
        if (pthread_create(&p->thread, NULL, proxy_thread, p) != 0) {
            comm->proxy = NULL;
            free(p);
            return zn_msc_res(
                zn_error(ncclSystemError, ZN_PROXY, "mscclppProxyLaunch: pthread_create failed"));
        }
        p->running = 1;
    }
    return mscclppSuccess;
}

/* What the proxy or a device wait recorded. */
static ncclResult_t proxy_report(struct mscclppComm *c, struct msc_proxy *p)
{
    if (p->error != ncclSuccess) return p->error;
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

void zn_msc_proxy_free(struct mscclppComm *c)
{
    struct msc_proxy *p = c->proxy;
    if (!p) return;
    atomic_store(&p->stop, 1);
    if (p->running) pthread_join(p->thread, NULL);
    free(p);
    c->proxy = NULL;
}

ZN_MSC_EXPORT mscclppResult_t mscclppProxyStop(mscclppComm_t comm)
{
    if (!comm)
        return zn_msc_res(
            zn_error(ncclInvalidArgument, ZN_PROXY, "mscclppProxyStop: comm is NULL"));
    struct msc_proxy *p = comm->proxy;
    if (!p)
        return zn_msc_res(zn_error(ncclInvalidUsage, ZN_PROXY, "mscclppProxyStop: no proxy runs"));
    /* The peers' kernels may still push triggers that this proxy serves (signals to them):
     * stop only once every rank got here. */
    ncclResult_t res = zn_boot_barrier(comm->boot);
    atomic_store(&p->stop, 1);
    if (p->running) pthread_join(p->thread, NULL);
    p->running = 0;
    ncclResult_t rep = proxy_report(comm, p);
    zn_msc_proxy_free(comm);
    return zn_msc_res(rep != ncclSuccess ? rep : res);
}
