/*
 * mscclppTransportSHM: connections over host memory between processes of one host, driven by
 * host threads (zincConn* in zinc.h). MSCCL++ 0.1 names this transport and leaves it a TODO.
 *
 * Memory. A connection's buffer may be any host memory of its process. One that lies in a
 * buffer from zincConnMemAlloc (a zinc shared memory segment, util/shm.c, that each peer maps
 * once, whatever number of connections use it) is written by the peer with plain stores. Any
 * other buffer (malloc, a stack array, a file mapping) is described to the peer as (pid,
 * address): the peer's puts into it are process_vm_writev calls (cross-memory attach, as Open
 * MPI's windows do), and a put reads its own source with plain loads either way. The kernel
 * allows cross-memory attach only where ptrace would be allowed (Yama's ptrace_scope, same
 * user, container seccomp profiles), so setup probes it with a 1-byte read of the peer and a
 * refusal fails mscclppConnectionSetup with the reason, printed to stderr once besides the log.
 * The signal words of the connections set up in one mscclppConnectionSetup round live in
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
#include "util/size.h"

#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

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
    /* Any other memory: the peer reaches it with cross-memory attach, which fails on pages
     * that are not mapped; refuse those here rather than at the first put. */
    if (size > SIZE_MAX || !zn_host_range_mapped(buf, (size_t)size))
        return zn_error(ncclInvalidArgument, ZN_SHM,
                        "connection to rank %d tag %d: buffer %p + %llu bytes is not host memory "
                        "of this process (is the size larger than the buffer?)",
                        remote_rank, tag, buf, (unsigned long long)size);
    *seg = NULL;
    *off = 0;
    return ncclSuccess;
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
        if (h->local_seg) {
            snprintf(d->buf_seg, sizeof(d->buf_seg), "%s", h->local_seg->seg.name);
            d->buf_seg_size = h->local_seg->seg.size;
            d->buf_off = h->local_off;
        } else {
            d->buf_pid = (int32_t)getpid();
            d->buf_addr = (uint64_t)(uintptr_t)c->dev[i].localBuff;
        }
        snprintf(d->sig_seg, sizeof(d->sig_seg), "%s", sig->seg.name);
        d->sig_seg_size = sig->seg.size;
        d->sig_off = (uint64_t)k * ZN_MSC_SIGNAL_SLOT;
        k++;
    }
    return ncclSuccess;
}

/* What to do when the kernel refuses cross-memory attach, printed to stderr once per process
 * as well as logged: a program that replaced the log handler still learns why. */
static atomic_int cma_refusal_printed;

static ncclResult_t cma_refused(struct mscclppComm *c, struct zn_msc_conn *h, int err)
{
    char who[160];
    zn_peer_str(&c->tctx, h->remote_rank, who, sizeof(who));
    const char *fix =
        err == ENOSYS ? "this kernel or its seccomp profile does not provide process_vm_readv/"
                        "writev (a container profile must allow them)"
        : err == EPERM
            ? "ptrace access to the peer is refused (Yama: set /proc/sys/kernel/yama/ptrace_scope "
              "to 0 or give the ranks CAP_SYS_PTRACE; the ranks must run as one user; a "
              "container's seccomp profile must allow process_vm_readv/writev)"
            : "the peer's buffer could not be read";
    char msg[768];
    snprintf(msg, sizeof(msg),
             "SHM connection to %s tag %d: the peer's buffer is not from zincConnMemAlloc, so "
             "puts must use cross-memory attach (process_vm_writev), and the kernel refuses it "
             "(%s): %s. Allocate the connection buffers with zincConnMemAlloc instead, or allow "
             "cross-memory attach",
             who, h->tag, strerror(err), fix);
    if (!atomic_exchange(&cma_refusal_printed, 1)) fprintf(stderr, "zinc: %s\n", msg);
    return zn_error(ncclSystemError, ZN_SHM, "%s", msg);
}

/* The peer's buffer is plain memory of its process: check that the pid is the peer's own and
 * that the kernel lets this process reach it. */
static ncclResult_t cma_attach(struct mscclppComm *c, int i, const struct zn_msc_shm_desc *peer)
{
    struct zn_msc_conn *h = &c->host[i];
    int p = h->remote_rank;
    const struct zn_peer_info *me = &c->peers[c->rank], *them = &c->peers[p];
    if (peer->buf_pid <= 0 || peer->buf_pid != them->pid || peer->buf_addr == 0 ||
        peer->buf_addr + h->remote_size < peer->buf_addr)
        return zn_error(ncclRemoteError, ZN_SHM,
                        "connection to rank %d tag %d: the peer's descriptor is inconsistent "
                        "(pid %d, rank %d's pid is %d)",
                        p, h->tag, (int)peer->buf_pid, p, (int)them->pid);
    /* In another pid namespace the pid names some other process here (peer.c says the same). */
    if (them->host_hash != me->host_hash || !me->pid_ns || them->pid_ns != me->pid_ns)
        return zn_error(ncclInvalidUsage, ZN_SHM,
                        "connection to rank %d tag %d: the peer's buffer is not from "
                        "zincConnMemAlloc, and rank %d runs in another pid namespace, where "
                        "cross-memory attach cannot name it; allocate the connection buffers "
                        "with zincConnMemAlloc",
                        p, h->tag, p);
    char byte;
    struct iovec l = { &byte, 1 };
    struct iovec r = { (void *)(uintptr_t)peer->buf_addr, 1 };
    if (process_vm_readv(peer->buf_pid, &l, 1, &r, 1, 0) != 1) {
        int err = errno;
        if (err == ESRCH) {
            char who[160];
            zn_peer_str(&c->tctx, p, who, sizeof(who));
            return zn_error(ncclRemoteError, ZN_SHM, "connection setup: %s has exited", who);
        }
        return cma_refused(c, h, err);
    }
    h->remote_pid = peer->buf_pid;
    h->remote_addr = peer->buf_addr;
    c->dev[i].remoteBuff = NULL; /* not mapped here */
    return ncclSuccess;
}

ncclResult_t zn_msc_shm_attach(struct mscclppComm *c, int i, const struct zn_msc_shm_desc *peer)
{
    struct zn_msc_conn *h = &c->host[i];
    int p = h->remote_rank;
    int cma = peer->buf_seg[0] == 0;
    if ((!cma && (peer->buf_off > peer->buf_seg_size ||
                  h->remote_size > peer->buf_seg_size - peer->buf_off)) ||
        peer->sig_seg_size < ZN_MSC_SIGNAL_SLOT ||
        peer->sig_off > peer->sig_seg_size - ZN_MSC_SIGNAL_SLOT)
        return zn_error(ncclRemoteError, ZN_SHM,
                        "connection to rank %d tag %d: the peer's descriptor is inconsistent", p,
                        h->tag);
    struct zn_msc_seg *buf = NULL, *sig;
    if (cma)
        ZN_CHECK(cma_attach(c, i, peer));
    else
        ZN_CHECK(seg_attach(c, &c->peer_bufs, p, peer->buf_seg, peer->buf_seg_size, &buf));
    ZN_CHECK(seg_attach(c, &c->signal_segs, p, peer->sig_seg, peer->sig_seg_size, &sig));
    if (buf) c->dev[i].remoteBuff = (char *)buf->seg.base + peer->buf_off;
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

/* A put into a peer buffer that is plain memory of the peer's process (checked by check_put).
 * The kernel may copy less than asked (a page it could not fault in, or its own limit per
 * call): go on from there, and fail only on an error. The signal that follows is a release
 * store after this call returns, so a wait that sees it sees these bytes. */
static ncclResult_t cma_put(struct zn_msc_conn *h, const char *fn, uint64_t dstOffset,
                            uint64_t srcOffset, uint64_t size)
{
    const char *src = (const char *)h->comm->dev[h->idx].localBuff + srcOffset;
    uint64_t done = 0;
    while (done < size) {
        struct iovec l = { (void *)(uintptr_t)(src + done), (size_t)(size - done) };
        struct iovec r = { (void *)(uintptr_t)(h->remote_addr + dstOffset + done),
                           (size_t)(size - done) };
        ssize_t n = process_vm_writev(h->remote_pid, &l, 1, &r, 1, 0);
        if (n > 0) {
            done += (uint64_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        int err = n < 0 ? errno : EFAULT;
        if (err == ESRCH) {
            char who[160];
            zn_peer_str(&h->comm->tctx, h->remote_rank, who, sizeof(who));
            return zn_error(ncclRemoteError, ZN_SHM, "%s: %s (connection tag %d) has exited", fn,
                            who, h->tag);
        }
        return zn_error(err == EFAULT ? ncclRemoteError : ncclSystemError, ZN_SHM,
                        "%s to rank %d tag %d: process_vm_writev of %llu bytes at offset %llu of "
                        "the peer's buffer: %s%s",
                        fn, h->remote_rank, h->tag, (unsigned long long)(size - done),
                        (unsigned long long)(dstOffset + done), strerror(err),
                        err == EFAULT ? " (did the peer free or unmap its connection buffer?)"
                                      : "");
    }
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
    if (h->remote_pid) return cma_put(h, "zincConnPut", dstOffset, srcOffset, size);
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
    if (!s)
        return zn_error(ncclInvalidArgument, ZN_SHM,
                        "mscclppRegisterBuffer: on SHM connections a registered buffer must be "
                        "from zincConnMemAlloc on this communicator, and %p is not in one",
                        buf);
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
