/*
 * mscclppTransportSHM: connections over host memory between processes of one host, driven by
 * host threads (zincConn* in zinc.h), on the shm transport's one-sided table (zn_shm_rma,
 * transport/shm_rma.c: the mapping, the copies, cross-memory attach). MSCCL++ 0.1 names this
 * transport and leaves it a TODO.
 *
 * What stays here is MSCCL++'s: the communicator's one-sided domain (opened at first use),
 * zincConnMemAlloc buffers as its regions, each connection's keys in the setup descriptor, and
 * the device-connection layout. A connection's buffer may be any host memory of its process:
 * one in a zincConnMemAlloc buffer is mapped by the peer and written with plain stores, any
 * other is reached with cross-memory attach (the table's key_import probes it and explains a
 * refusal). The signal words of the connections set up in one mscclppConnectionSetup round
 * live in one segment per rank and round (mem_alloc), ZN_MSC_SIGNAL_SLOT bytes per connection
 * (msc.h); the peer imports it to reach remoteSignalEpochId.
 *
 * Signals. Only the peer writes a connection's `proxy` word and only this side writes its
 * `device` word and waitEpochId: signal raises `device` and has the table store it into the
 * peer's `proxy` word with release order, so the puts before it are visible to the wait that
 * sees it.
 */
#include "msc.h"
#include "util/clock.h"
#include "util/err.h"
#include "util/size.h"

#include <sched.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* The table, looked up as every caller does (a few comparisons per call). */
#define RMA zn_transport_rma(&zn_transport_shm)

/* The communicator's shm one-sided domain, opened at first use. */
static ncclResult_t shm_dom(struct mscclppComm *c, void **out)
{
    if (!c->shm_dom) ZN_CHECK(RMA->domain_open(&c->tctx, &c->shm_dom));
    *out = c->shm_dom;
    return ncclSuccess;
}

void zn_msc_shm_free_all(struct mscclppComm *c)
{
    RMA->domain_close(c->shm_dom); /* the connections, regions and mappings of every round */
    c->shm_dom = NULL;
    while (c->own_bufs) {
        struct zn_msc_buf *b = c->own_bufs;
        c->own_bufs = b->next;
        free(b);
    }
}

ncclResult_t zn_msc_shm_check_buffer(struct mscclppComm *c, int remote_rank, int tag, void *buf,
                                     uint64_t size, const struct zn_msc_buf **in)
{
    for (const struct zn_msc_buf *b = c->own_bufs; b; b = b->next) {
        uintptr_t base = (uintptr_t)b->ptr, p = (uintptr_t)buf;
        if (p < base || p >= base + b->size) continue;
        if (size > base + b->size - p)
            return zn_error(ncclInvalidArgument, ZN_SHM,
                            "connection to rank %d tag %d: buffer %p + %llu bytes runs past the "
                            "end of its zincConnMemAlloc buffer (%zu bytes at %p)",
                            remote_rank, tag, buf, (unsigned long long)size, b->size, b->ptr);
        *in = b;
        return ncclSuccess;
    }
    /* Any other memory: the peer reaches it with cross-memory attach, which fails on pages
     * that are not mapped; refuse those here rather than at the first put. */
    if (size > SIZE_MAX || !zn_host_range_mapped(buf, (size_t)size))
        return zn_error(ncclInvalidArgument, ZN_SHM,
                        "connection to rank %d tag %d: buffer %p + %llu bytes is not host memory "
                        "of this process (is the size larger than the buffer?)",
                        remote_rank, tag, buf, (unsigned long long)size);
    *in = NULL;
    return ncclSuccess;
}

ncclResult_t zn_msc_shm_prepare(struct mscclppComm *c, int first, int n_shm, int npeers,
                                struct zn_msc_shm_desc *descs)
{
    void *dom, *sig, *sig_region;
    ZN_CHECK(shm_dom(c, &dom));
    size_t sig_len = (size_t)n_shm * ZN_MSC_SIGNAL_SLOT;
    ZN_CHECK(RMA->mem_alloc(dom, sig_len, 1 + npeers, &sig, &sig_region));
    struct zn_rma_key sig_key;
    ZN_CHECK(RMA->key_pack(dom, sig_region, &sig_key));
    int k = 0;
    for (int i = first; i < c->nconns; i++) {
        struct zn_msc_conn *h = &c->host[i];
        if (h->transport != mscclppTransportSHM) continue;
        char *slot = (char *)sig + (size_t)k * ZN_MSC_SIGNAL_SLOT;
        c->dev[i].localSignalEpochId = (struct mscclppDevConnSignalEpochId *)slot;
        c->dev[i].waitEpochId = (uint64_t *)(slot + 16);
        struct zn_msc_shm_desc *d = &descs[i - first];
        struct zn_rma_key unused;
        struct zn_rma_ep_args a = { .peer = h->remote_rank,
                                    .tag = h->tag,
                                    .buf = c->dev[i].localBuff,
                                    .len = h->local_size,
                                    .sig = &c->dev[i].localSignalEpochId->proxy };
        ZN_CHECK(RMA->mem_reg(dom, c->dev[i].localBuff, h->local_size, &h->lreg));
        ZN_CHECK(RMA->key_pack(dom, h->lreg, &d->buf));
        ZN_CHECK(RMA->ep_open(dom, &a, &h->ep, &unused));
        d->sig = sig_key;
        d->sig_off = (uint64_t)k * ZN_MSC_SIGNAL_SLOT;
        k++;
    }
    return ncclSuccess;
}

ncclResult_t zn_msc_shm_attach(struct mscclppComm *c, int i, const struct zn_msc_shm_desc *peer)
{
    struct zn_msc_conn *h = &c->host[i];
    void *dom = c->shm_dom;
    size_t buf_len, sig_len;
    ZN_CHECK(RMA->key_import(dom, h->remote_rank, &peer->buf, &h->rbuf));
    ZN_CHECK(RMA->key_import(dom, h->remote_rank, &peer->sig, &h->rsig));
    (void)RMA->remote_addr(h->rbuf, &buf_len);
    char *sig = RMA->remote_addr(h->rsig, &sig_len);
    /* What the peer declared must lie inside what its keys name. */
    if (!sig || sig_len < ZN_MSC_SIGNAL_SLOT || peer->sig_off > sig_len - ZN_MSC_SIGNAL_SLOT ||
        h->remote_size > buf_len)
        return zn_error(ncclRemoteError, ZN_SHM,
                        "connection to rank %d tag %d: the peer's descriptor is inconsistent",
                        h->remote_rank, h->tag);
    h->rsig_off = peer->sig_off;
    c->dev[i].remoteBuff = RMA->remote_addr(h->rbuf, NULL); /* NULL: cross-memory attach */
    c->dev[i].remoteSignalEpochId = (struct mscclppDevConnSignalEpochId *)(sig + peer->sig_off);
    return ncclSuccess;
}

ZN_MSC_EXPORT ncclResult_t zincConnMemAlloc(struct mscclppComm *comm, size_t size, void **ptr)
{
    ZN_CHECK(zn_msc_comm_check(comm, "zincConnMemAlloc"));
    if (!ptr || size == 0)
        return zn_error(ncclInvalidArgument, ZN_SHM,
                        "zincConnMemAlloc: size %zu, ptr %p (neither may be 0 or NULL)", size,
                        (void *)ptr);
    void *dom;
    struct zn_msc_buf *b;
    ZN_CHECK(shm_dom(comm, &dom));
    ZN_CHECK(zn_calloc(&b, 1, "zincConnMemAlloc buffer"));
    /* Every rank may map it; util/shm.c unlinks the name when all have. */
    ncclResult_t res = RMA->mem_alloc(dom, size, comm->nranks, &b->ptr, &b->region);
    if (res != ncclSuccess) {
        free(b);
        return res;
    }
    b->size = size;
    b->next = comm->own_bufs;
    comm->own_bufs = b;
    *ptr = b->ptr;
    return ncclSuccess;
}

ZN_MSC_EXPORT ncclResult_t zincConnMemFree(struct mscclppComm *comm, void *ptr)
{
    ZN_CHECK(zn_msc_comm_check(comm, "zincConnMemFree"));
    if (!ptr) return zn_error(ncclInvalidArgument, ZN_SHM, "zincConnMemFree: ptr is NULL");
    for (struct zn_msc_buf **pp = &comm->own_bufs; *pp; pp = &(*pp)->next) {
        struct zn_msc_buf *b = *pp;
        if (b->ptr != ptr) continue;
        for (int i = 0; i < comm->nconns; i++)
            if (comm->host[i].local_buf == b)
                return zn_error(ncclInvalidUsage, ZN_SHM,
                                "zincConnMemFree: %p is the buffer of the connection to rank %d "
                                "tag %d (free it after mscclppCommDestroy)",
                                ptr, comm->host[i].remote_rank, comm->host[i].tag);
        *pp = b->next;
        RMA->mem_free(comm->shm_dom, b->region);
        free(b);
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
    return RMA->put(h->ep, h->lreg, srcOffset, h->rbuf, dstOffset, size);
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
    return RMA->signal(h->ep, h->rsig,
                       h->rsig_off + offsetof(struct mscclppDevConnSignalEpochId, proxy), e);
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
    ZN_CHECK(RMA->flush(h->ep));
    return peer_alive(h, "zincConnFlush");
}

ncclResult_t zn_msc_shm_buf_desc(struct mscclppComm *c, void *buf, uint64_t size,
                                 struct zn_msc_shm_desc *d)
{
    const struct zn_msc_buf *in;
    void *region;
    ZN_CHECK(zn_msc_shm_check_buffer(c, -1, -1, buf, size, &in));
    if (!in)
        return zn_error(ncclInvalidArgument, ZN_SHM,
                        "mscclppRegisterBuffer: on SHM connections a registered buffer must be "
                        "from zincConnMemAlloc on this communicator, and %p is not in one",
                        buf);
    memset(d, 0, sizeof(*d));
    ZN_CHECK(RMA->mem_reg(c->shm_dom, buf, size, &region));
    return RMA->key_pack(c->shm_dom, region, &d->buf);
}

ncclResult_t zn_msc_shm_buf_open(struct mscclppComm *c, int peer, const struct zn_msc_shm_desc *d,
                                 uint64_t size, void **ptr)
{
    void *dom, *remote;
    ZN_CHECK(shm_dom(c, &dom));
    size_t len;
    ZN_CHECK(RMA->key_import(dom, peer, &d->buf, &remote));
    *ptr = RMA->remote_addr(remote, &len);
    if (!*ptr || size > len)
        return zn_error(ncclRemoteError, ZN_SHM,
                        "rank %d registered a buffer of %llu bytes that is not in shared memory "
                        "or larger than its key says (%zu)",
                        peer, (unsigned long long)size, len);
    return ncclSuccess;
}
