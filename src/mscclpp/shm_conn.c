/*
 * mscclppTransportSHM: connections over host memory between processes of one host, driven by
 * host threads (zincConn* in zinc.h). MSCCL++ 0.1 names this transport and leaves it a TODO.
 *
 * Memory. A connection's buffer must lie in a buffer from zincConnMemAlloc: a zinc shared
 * memory segment (util/shm.c) that each peer maps once, whatever number of connections use
 * it. The signal words of the connections set up in one mscclppConnectionSetup round live in
 * one segment per rank and round, ZN_MSC_SIGNAL_SLOT bytes per connection (msc.h); the peer
 * maps it to reach remoteSignalEpochId.
 *
 * Signals. Only the peer writes a connection's `proxy` word and only this side writes its
 * `device` word and waitEpochId: signal raises `device` and stores it into the peer's `proxy`
 * word with release order, so the puts before it are visible to the wait that sees it.
 *
 * Names. Segments are named from the communicator's hash, the rank and a counter; the name is
 * unlinked once every expected process mapped it (util/shm.c), or by its creator when it frees
 * it, so a job killed after setup leaves nothing in /dev/shm.
 */
#include "msc.h"
#include "util/clock.h"
#include "util/err.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static ncclResult_t seg_create(struct mscclppComm *c, const char *kind, int n, size_t size,
                               int nmappers, struct zn_msc_seg **out)
{
    struct zn_msc_seg *s;
    ZN_CHECK(zn_calloc(&s, 1, "shm segment"));
    char name[96];
    snprintf(name, sizeof(name), "/zn-msc-%016llx-%d-%s%d", (unsigned long long)c->tctx.comm_hash,
             c->rank, kind, n);
    ncclResult_t res = zn_shm_create(name, size, nmappers, &s->seg);
    if (res != ncclSuccess) {
        free(s);
        return res;
    }
    s->creator_rank = c->rank;
    *out = s;
    return ncclSuccess;
}

/* Map a peer's segment once per communicator (list: peer_bufs or signal_segs). */
static ncclResult_t seg_attach(struct mscclppComm *c, struct zn_msc_seg **list, int peer,
                               const char *name, uint64_t size, struct zn_msc_seg **out)
{
    for (struct zn_msc_seg *s = *list; s; s = s->next)
        if (s->creator_rank == peer && !strcmp(s->seg.name, name)) {
            *out = s;
            return ncclSuccess;
        }
    char prefix[64];
    snprintf(prefix, sizeof(prefix), "/zn-msc-%016llx-%d-", (unsigned long long)c->tctx.comm_hash,
             peer);
    if (strncmp(name, prefix, strlen(prefix)) != 0 || memchr(name, 0, 96) == NULL)
        return zn_error(ncclRemoteError, ZN_SHM,
                        "connection setup: rank %d named a segment outside its namespace", peer);
    struct zn_msc_seg *s;
    ZN_CHECK(zn_calloc(&s, 1, "shm segment"));
    int rc = zn_shm_attach(name, size, zn_deadline_from_now(), &c->abort_flag, &s->seg);
    if (rc != 0) {
        char who[160];
        zn_peer_str(&c->tctx, peer, who, sizeof(who));
        free(s);
        return zn_error(ncclRemoteError, ZN_SHM, "cannot map %s's shared memory %s: %s", who, name,
                        strerror(-rc));
    }
    s->creator_rank = peer;
    s->next = *list;
    *list = s;
    *out = s;
    return ncclSuccess;
}

static void seg_list_free(struct zn_msc_seg **list)
{
    while (*list) {
        struct zn_msc_seg *s = *list;
        *list = s->next;
        zn_shm_detach(&s->seg);
        free(s);
    }
}

void zn_msc_shm_free_all(struct mscclppComm *c)
{
    seg_list_free(&c->peer_bufs);
    seg_list_free(&c->signal_segs);
    seg_list_free(&c->own_bufs);
}

ncclResult_t zn_msc_shm_check_buffer(struct mscclppComm *c, int remote_rank, int tag, void *buf,
                                     uint64_t size, const struct zn_msc_seg **seg, uint64_t *off)
{
    for (const struct zn_msc_seg *s = c->own_bufs; s; s = s->next) {
        uintptr_t base = (uintptr_t)s->seg.base, p = (uintptr_t)buf;
        if (p < base || p >= base + s->seg.size) continue;
        if (size > base + s->seg.size - p)
            return zn_error(ncclInvalidArgument, ZN_SHM,
                            "connection to rank %d tag %d: buffer %p + %llu bytes runs past the "
                            "end of its zincConnMemAlloc buffer (%zu bytes at %p)",
                            remote_rank, tag, buf, (unsigned long long)size, s->seg.size,
                            s->seg.base);
        *seg = s;
        *off = p - base;
        return ncclSuccess;
    }
    return zn_error(ncclInvalidArgument, ZN_SHM,
                    "connection to rank %d tag %d: transport SHM needs a buffer from "
                    "zincConnMemAlloc on this communicator, and %p is not in one",
                    remote_rank, tag, buf);
}

ncclResult_t zn_msc_shm_prepare(struct mscclppComm *c, int first, int n_shm, int npeers,
                                struct zn_msc_shm_desc *descs)
{
    struct zn_msc_seg *sig;
    ZN_CHECK(seg_create(c, "s", c->nrounds, (size_t)n_shm * ZN_MSC_SIGNAL_SLOT, 1 + npeers, &sig));
    sig->next = c->signal_segs;
    c->signal_segs = sig;
    memset(sig->seg.base, 0, sig->seg.size);
    int k = 0;
    for (int i = first; i < c->nconns; i++) {
        struct zn_msc_conn *h = &c->host[i];
        if (h->transport != mscclppTransportSHM) continue;
        char *slot = (char *)sig->seg.base + (size_t)k * ZN_MSC_SIGNAL_SLOT;
        c->dev[i].localSignalEpochId = (struct mscclppDevConnSignalEpochId *)slot;
        c->dev[i].waitEpochId = (uint64_t *)(slot + 16);
        struct zn_msc_shm_desc *d = &descs[i - first];
        snprintf(d->buf_seg, sizeof(d->buf_seg), "%s", h->local_seg->seg.name);
        d->buf_seg_size = h->local_seg->seg.size;
        d->buf_off = h->local_off;
        snprintf(d->sig_seg, sizeof(d->sig_seg), "%s", sig->seg.name);
        d->sig_seg_size = sig->seg.size;
        d->sig_off = (uint64_t)k * ZN_MSC_SIGNAL_SLOT;
        k++;
    }
    return ncclSuccess;
}

ncclResult_t zn_msc_shm_attach(struct mscclppComm *c, int i, const struct zn_msc_shm_desc *peer)
{
    struct zn_msc_conn *h = &c->host[i];
    int p = h->remote_rank;
    if (peer->buf_off > peer->buf_seg_size || h->remote_size > peer->buf_seg_size - peer->buf_off ||
        peer->sig_seg_size < ZN_MSC_SIGNAL_SLOT ||
        peer->sig_off > peer->sig_seg_size - ZN_MSC_SIGNAL_SLOT)
        return zn_error(ncclRemoteError, ZN_SHM,
                        "connection to rank %d tag %d: the peer's descriptor is inconsistent", p,
                        h->tag);
    struct zn_msc_seg *buf, *sig;
    ZN_CHECK(seg_attach(c, &c->peer_bufs, p, peer->buf_seg, peer->buf_seg_size, &buf));
    ZN_CHECK(seg_attach(c, &c->signal_segs, p, peer->sig_seg, peer->sig_seg_size, &sig));
    c->dev[i].remoteBuff = (char *)buf->seg.base + peer->buf_off;
    c->dev[i].remoteSignalEpochId =
        (struct mscclppDevConnSignalEpochId *)((char *)sig->seg.base + peer->sig_off);
    return ncclSuccess;
}

ZN_MSC_EXPORT ncclResult_t zincConnMemAlloc(struct mscclppComm *comm, size_t size, void **ptr)
{
    ZN_CHECK(zn_msc_comm_check(comm, "zincConnMemAlloc"));
    if (!ptr || size == 0)
        return zn_error(ncclInvalidArgument, ZN_SHM,
                        "zincConnMemAlloc: size %zu, ptr %p (neither may be 0 or NULL)", size,
                        (void *)ptr);
    struct zn_msc_seg *s;
    /* Every rank may map it; util/shm.c unlinks the name when all have. */
    ZN_CHECK(seg_create(comm, "b", comm->nallocs, size, comm->nranks, &s));
    comm->nallocs++;
    memset(s->seg.base, 0, size);
    s->next = comm->own_bufs;
    comm->own_bufs = s;
    *ptr = s->seg.base;
    return ncclSuccess;
}

ZN_MSC_EXPORT ncclResult_t zincConnMemFree(struct mscclppComm *comm, void *ptr)
{
    ZN_CHECK(zn_msc_comm_check(comm, "zincConnMemFree"));
    if (!ptr) return zn_error(ncclInvalidArgument, ZN_SHM, "zincConnMemFree: ptr is NULL");
    for (struct zn_msc_seg **pp = &comm->own_bufs; *pp; pp = &(*pp)->next) {
        struct zn_msc_seg *s = *pp;
        if (s->seg.base != ptr) continue;
        for (int i = 0; i < comm->nconns; i++)
            if (comm->host[i].local_seg == s)
                return zn_error(ncclInvalidUsage, ZN_SHM,
                                "zincConnMemFree: %p is the buffer of the connection to rank %d "
                                "tag %d (free it after mscclppCommDestroy)",
                                ptr, comm->host[i].remote_rank, comm->host[i].tag);
        *pp = s->next;
        zn_shm_detach(&s->seg);
        free(s);
        return ncclSuccess;
    }
    return zn_error(ncclInvalidArgument, ZN_SHM,
                    "zincConnMemFree: %p did not come from zincConnMemAlloc on this communicator",
                    ptr);
}

/* The connection behind a device connection handle, checked for host use. */
static ncclResult_t host_conn(struct mscclppDevConn *d, const char *fn, struct zn_msc_conn **out)
{
    struct zn_msc_conn *h = d ? (struct zn_msc_conn *)d->zincHostConn : NULL;
    if (!h) return zn_error(ncclInvalidArgument, ZN_SHM, "%s: conn is not a set-up connection", fn);
    if ((h->transport != mscclppTransportSHM && h->transport != mscclppTransportIB) || !h->ready ||
        h->idx >= h->comm->nsetup)
        return zn_error(ncclInvalidUsage, ZN_SHM,
                        "%s: the connection to rank %d tag %d is not a set-up SHM or IB "
                        "connection (host functions serve mscclppTransportSHM and IB)",
                        fn, h->remote_rank, h->tag);
    *out = h;
    return ncclSuccess;
}

static ncclResult_t peer_alive(struct zn_msc_conn *h, const char *fn)
{
    struct mscclppComm *c = h->comm;
    if (!zn_peer_dead(c->watch, h->remote_rank)) return ncclSuccess;
    char who[160];
    zn_peer_str(&c->tctx, h->remote_rank, who, sizeof(who));
    return zn_error(ncclRemoteError, ZN_SHM, "%s: %s (connection tag %d) has exited", fn, who,
                    h->tag);
}

/* The ranges of a put, checked against both registered buffers. */
static ncclResult_t check_put(struct zn_msc_conn *h, const char *fn, uint64_t dstOffset,
                              uint64_t srcOffset, uint64_t size)
{
    if (srcOffset > h->local_size || size > h->local_size - srcOffset)
        return zn_error(ncclInvalidArgument, ZN_SHM,
                        "%s to rank %d tag %d: source [%llu, +%llu) outside the local buffer of "
                        "%llu bytes",
                        fn, h->remote_rank, h->tag, (unsigned long long)srcOffset,
                        (unsigned long long)size, (unsigned long long)h->local_size);
    if (dstOffset > h->remote_size || size > h->remote_size - dstOffset)
        return zn_error(ncclInvalidArgument, ZN_SHM,
                        "%s to rank %d tag %d: destination [%llu, +%llu) outside the peer's buffer "
                        "of %llu bytes",
                        fn, h->remote_rank, h->tag, (unsigned long long)dstOffset,
                        (unsigned long long)size, (unsigned long long)h->remote_size);
    return ncclSuccess;
}

ZN_MSC_EXPORT ncclResult_t zincConnPut(struct mscclppDevConn *conn, uint64_t dstOffset,
                                       uint64_t srcOffset, uint64_t size)
{
    struct zn_msc_conn *h;
    ZN_CHECK(host_conn(conn, "zincConnPut", &h));
    ZN_CHECK(check_put(h, "zincConnPut", dstOffset, srcOffset, size));
    if (h->transport == mscclppTransportIB) {
        ZN_CHECK(zn_msc_net_host_put(h, "zincConnPut"));
        return zn_msc_net_enqueue(h, 1, dstOffset, srcOffset, size, "zincConnPut");
    }
    ZN_CHECK(peer_alive(h, "zincConnPut"));
    memcpy((char *)conn->remoteBuff + dstOffset, (const char *)conn->localBuff + srcOffset, size);
    return ncclSuccess;
}

ZN_MSC_EXPORT ncclResult_t zincConnSignal(struct mscclppDevConn *conn)
{
    struct zn_msc_conn *h;
    ZN_CHECK(host_conn(conn, "zincConnSignal", &h));
    if (h->transport == mscclppTransportIB)
        return zn_msc_net_enqueue(h, 2, 0, 0, 0, "zincConnSignal");
    ZN_CHECK(peer_alive(h, "zincConnSignal"));
    uint64_t e = __atomic_load_n(&conn->localSignalEpochId->device, __ATOMIC_RELAXED) + 1;
    __atomic_store_n(&conn->localSignalEpochId->device, e, __ATOMIC_RELAXED);
    __atomic_store_n(&conn->remoteSignalEpochId->proxy, e, __ATOMIC_RELEASE);
    return ncclSuccess;
}

ZN_MSC_EXPORT ncclResult_t zincConnPutWithSignal(struct mscclppDevConn *conn, uint64_t dstOffset,
                                                 uint64_t srcOffset, uint64_t size)
{
    struct zn_msc_conn *h;
    ZN_CHECK(host_conn(conn, "zincConnPutWithSignal", &h));
    if (h->transport == mscclppTransportIB) {
        /* One header carries both: the signal lands with the data. */
        ZN_CHECK(check_put(h, "zincConnPutWithSignal", dstOffset, srcOffset, size));
        ZN_CHECK(zn_msc_net_host_put(h, "zincConnPutWithSignal"));
        return zn_msc_net_enqueue(h, 3, dstOffset, srcOffset, size, "zincConnPutWithSignal");
    }
    ZN_CHECK(zincConnPut(conn, dstOffset, srcOffset, size));
    return zincConnSignal(conn);
}

ZN_MSC_EXPORT ncclResult_t zincConnWait(struct mscclppDevConn *conn)
{
    struct zn_msc_conn *h;
    ZN_CHECK(host_conn(conn, "zincConnWait", &h));
    if (h->transport == mscclppTransportIB) return zn_msc_net_wait(h);
    uint64_t want = *conn->waitEpochId + 1;
    int64_t deadline = zn_deadline_from_now();
    for (uint32_t polls = 1;; polls++) {
        if (__atomic_load_n(&conn->localSignalEpochId->proxy, __ATOMIC_ACQUIRE) >= want) break;
        /* Spin briefly for latency, then yield: ranks may outnumber cores. */
        if (polls > 256) sched_yield();
        if ((polls & 255) != 0) continue;
        ZN_CHECK(peer_alive(h, "zincConnWait"));
        if (zn_now_ns() > deadline)
            return zn_error(ncclSystemError, ZN_SHM,
                            "zincConnWait: no signal from rank %d on tag %d within ZINC_TIMEOUT "
                            "(%lld s; waiting for signal %llu)",
                            h->remote_rank, h->tag, (long long)(zn_timeout_ns() / 1000000000ll),
                            (unsigned long long)want);
    }
    /* Raised only once the signal arrived, so a wait that failed can be retried. */
    *conn->waitEpochId = want;
    return ncclSuccess;
}

ZN_MSC_EXPORT ncclResult_t zincConnFlush(struct mscclppDevConn *conn)
{
    struct zn_msc_conn *h;
    ZN_CHECK(host_conn(conn, "zincConnFlush", &h));
    if (h->transport == mscclppTransportIB) return zn_msc_net_flush(h);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    return peer_alive(h, "zincConnFlush");
}

ncclResult_t zn_msc_shm_buf_desc(struct mscclppComm *c, void *buf, uint64_t size,
                                 struct zn_msc_shm_desc *d)
{
    const struct zn_msc_seg *s;
    uint64_t off;
    ZN_CHECK(zn_msc_shm_check_buffer(c, -1, -1, buf, size, &s, &off));
    memset(d, 0, sizeof(*d));
    snprintf(d->buf_seg, sizeof(d->buf_seg), "%s", s->seg.name);
    d->buf_seg_size = s->seg.size;
    d->buf_off = off;
    return ncclSuccess;
}

ncclResult_t zn_msc_shm_buf_open(struct mscclppComm *c, int peer, const struct zn_msc_shm_desc *d,
                                 uint64_t size, void **ptr)
{
    if (d->buf_off > d->buf_seg_size || size > d->buf_seg_size - d->buf_off)
        return zn_error(ncclRemoteError, ZN_SHM, "rank %d described a buffer outside its segment",
                        peer);
    struct zn_msc_seg *s;
    ZN_CHECK(seg_attach(c, &c->peer_bufs, peer, d->buf_seg, d->buf_seg_size, &s));
    *ptr = (char *)s->seg.base + d->buf_off;
    return ncclSuccess;
}
