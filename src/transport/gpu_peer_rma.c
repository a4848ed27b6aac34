/*
 * The p2p transport's one-sided operations on their own (the second part of zn_p2p_rma, which
 * gpu_peer_ops.c's table points at): connections between GPUs of one host, one process per rank,
 * as libmscclpp's P2P connections make them.
 *
 * Memory is shared through legacy CUDA IPC handles (util/cuda_ipc.c), as MSCCL++ 0.1 does: a
 * region is a range of a cudaMalloc allocation, its key the allocation's handle and the
 * range's offset in it. cudaMalloc memory cannot be exported as a cuMem file descriptor, so
 * the main table's registration (cuMem fds through the process service) does not apply; a
 * cuMem allocation (ncclMemAlloc) is refused with a clear error for now. A peer opens an
 * allocation once per domain (CUDA IPC maps an allocation once per process; several regions
 * may share one). mem_alloc makes device memory (zeroed) that peers import the same way.
 *
 * put is one device-to-device copy (cuMemcpyDtoDAsync) on the domain's stream (a non-blocking
 * stream of the domain's GPU, made at the first connection), so puts of every connection of the
 * domain complete in issue order. (Splitting a put of 4 MB and more over two streams, for two
 * copy engines, made allgather through the proxy slower on 2 H200: 16 MB 40.0 - 41.4 us against
 * 35.6 in one copy.) A signal stores its value with a stream memory operation
 * (cuStreamWriteValue64: done by the GPU once the copies before it are complete and visible, no
 * copy engine), or, where the driver refuses that, copies it from the caller's stack. flush waits
 * for the stream.
 */
#include "gpu_peer.h"
#include "util/cuda.h"
#include "util/err.h"

#include <stdlib.h>
#include <string.h>

struct ipc_open {
    int peer;
    uint64_t base; /* in the peer */
    void *ptr;
    struct ipc_open *next;
};

/* A region of this rank. */
struct ipc_region {
    uint8_t handle[64];
    uint8_t *base; /* of the allocation */
    uint64_t alloc;
    uint8_t *ptr; /* of the region */
    uint64_t len;
    int owned; /* mem_alloc's: freed with it */
    struct ipc_region *next;
};

/* A peer's region as this rank reaches it. */
struct ipc_remote {
    uint8_t *ptr;
    uint64_t len;
    int owner;
    struct ipc_remote *next;
};

struct ipc_key {
    uint8_t handle[64];
    uint64_t alloc; /* of the allocation behind the handle */
    uint64_t off;   /* of the region in it */
    uint64_t len;
    uint64_t base; /* the allocation's address in its owner: names it for reuse */
    uint32_t owner;
    uint32_t pad;
};
_Static_assert(sizeof(struct ipc_key) <= ZN_RMA_KEY_MAX, "a p2p IPC key fits in zn_rma_key");

struct ipc_ep {
    struct zn_conn_hdr hdr;
    struct zn_p2p_dom *d;
    struct ipc_ep *next;
};

struct zn_p2p_dom {
    uint64_t magic; /* ZN_P2P_DOM_MAGIC: tells a domain from the main table's state */
    struct zn_tctx ctx;
    int dev;
    void *stream;   /* made at the first connection */
    int no_write64; /* the driver refused a stream write: signals are copies instead */
    struct ipc_open *opened;
    struct ipc_region *regions;
    struct ipc_remote *remotes;
    struct ipc_ep *eps;
};

int zn_p2p_is_dom(const void *state)
{
    return state && *(const uint64_t *)state == ZN_P2P_DOM_MAGIC;
}

ncclResult_t zn_p2p_dom_open(const struct zn_tctx *ctx, void **dom)
{
    int dev = ctx->peers[ctx->rank].cuda_dev;
    if (dev < 0) return zn_error(ncclInvalidUsage, ZN_P2P, "p2p: rank %d has no GPU", ctx->rank);
    struct zn_p2p_dom *d;
    ZN_CHECK(zn_calloc(&d, 1, "p2p one-sided domain"));
    d->magic = ZN_P2P_DOM_MAGIC;
    d->ctx = *ctx;
    d->dev = dev;
    *dom = d;
    return ncclSuccess;
}

void zn_p2p_dom_close(void *dom)
{
    struct zn_p2p_dom *d = dom;
    if (!d) return;
    if (d->stream) {
        (void)zn_cuda_stream_sync(d->stream);
        zn_cuda_stream_destroy(d->stream);
    }
    while (d->eps) {
        struct ipc_ep *e = d->eps;
        d->eps = e->next;
        free(e);
    }
    while (d->opened) {
        struct ipc_open *o = d->opened;
        d->opened = o->next;
        zn_cuda_ipc_close(o->ptr);
        free(o);
    }
    while (d->remotes) {
        struct ipc_remote *r = d->remotes;
        d->remotes = r->next;
        free(r);
    }
    while (d->regions) {
        struct ipc_region *r = d->regions;
        d->regions = r->next;
        if (r->owned) zn_cuda_free(r->base);
        free(r);
    }
    d->magic = 0;
    free(d);
}

/* A range of a cudaMalloc allocation of this process, on the domain's GPU. */
ncclResult_t zn_p2p_dom_mem_reg(void *dom, void *buf, size_t len, void **handle)
{
    struct zn_p2p_dom *d = dom;
    void *base;
    size_t alloc;
    struct zn_cumem m;
    if (zn_cuda_mem_range(buf, &base, &alloc) != 0)
        return zn_error(ncclInvalidArgument, ZN_P2P,
                        "P2P connection buffer %p is not device memory of this process", buf);
    /* The domain's copies and signals run on its GPU. A buffer of another GPU would still work,
     * but every copy would cross contexts (on a GPU another rank uses, at the time slicing's
     * pace): say so instead. */
    int dev = zn_cuda_pointer_device(buf);
    if (dev >= 0 && dev != d->dev)
        return zn_error(ncclInvalidUsage, ZN_P2P,
                        "P2P connection buffer %p is on GPU %d, but the communicator was created "
                        "with GPU %d current: call cudaSetDevice before mscclppCommInitRank",
                        buf, dev, d->dev);
    if (zn_cumem_find(buf, &m) == 0)
        return zn_error(ncclInvalidUsage, ZN_P2P,
                        "P2P connection buffer %p is a cuMem allocation (ncclMemAlloc); zinc's "
                        "P2P connections share cudaMalloc buffers only for now",
                        buf);
    uint64_t off = (uint64_t)((char *)buf - (char *)base);
    if (len > alloc - off)
        return zn_error(ncclInvalidArgument, ZN_P2P,
                        "P2P connection buffer %p + %zu bytes runs past its allocation (%zu bytes "
                        "at %p)",
                        buf, len, alloc, base);
    struct ipc_region *r;
    ZN_CHECK(zn_calloc(&r, 1, "p2p region"));
    ncclResult_t res = zn_cuda_ipc_get(base, r->handle);
    if (res != ncclSuccess) {
        free(r);
        return res;
    }
    r->base = base;
    r->alloc = alloc;
    r->ptr = buf;
    r->len = len;
    r->next = d->regions;
    d->regions = r;
    *handle = r;
    return ncclSuccess;
}

static void region_unlink(struct zn_p2p_dom *d, struct ipc_region *r)
{
    for (struct ipc_region **pp = &d->regions; *pp; pp = &(*pp)->next)
        if (*pp == r) {
            *pp = r->next;
            return;
        }
}

void zn_p2p_dom_mem_dereg(void *dom, void *handle)
{
    struct ipc_region *r = handle;
    if (!r || r->owned) return;
    region_unlink(dom, r);
    free(r);
}

/* Device memory of the domain's GPU, zeroed, for peers to import (nmappers: CUDA IPC needs no
 * count). */
ncclResult_t zn_p2p_dom_mem_alloc(void *dom, size_t len, int nmappers, void **ptr, void **handle)
{
    struct zn_p2p_dom *d = dom;
    void *mem, *h;
    ncclResult_t res;
    ZN_CHECK(zn_cuda_malloc(&mem, len, "p2p one-sided memory"));
    ZN_CHECK_GOTO(zn_cuda_memset(mem, 0, len), res, fail_free);
    ZN_CHECK_GOTO(zn_p2p_dom_mem_reg(d, mem, len, &h), res, fail_free);
    ((struct ipc_region *)h)->owned = 1;
    *ptr = mem;
    *handle = h;
    return ncclSuccess;
fail_free:
    zn_cuda_free(mem);
    return res;
}

void zn_p2p_dom_mem_free(void *dom, void *handle)
{
    struct ipc_region *r = handle;
    if (!r) return;
    region_unlink(dom, r);
    if (r->owned) zn_cuda_free(r->base);
    free(r);
}

ncclResult_t zn_p2p_dom_key_pack(void *dom, void *handle, struct zn_rma_key *key)
{
    struct zn_p2p_dom *d = dom;
    const struct ipc_region *r = handle;
    if (!r) return zn_error(ncclInvalidArgument, ZN_P2P, "p2p: key_pack of a NULL region");
    struct ipc_key k = { .alloc = r->alloc,
                         .off = (uint64_t)(r->ptr - r->base),
                         .len = r->len,
                         .base = (uint64_t)(uintptr_t)r->base,
                         .owner = (uint32_t)d->ctx.rank };
    memcpy(k.handle, r->handle, sizeof(k.handle));
    memset(key, 0, sizeof(*key));
    key->size = sizeof(k);
    memcpy(key->data, &k, sizeof(k));
    return ncclSuccess;
}

/* Open a peer's allocation once per domain. */
ncclResult_t zn_p2p_dom_key_import(void *dom, int peer, const struct zn_rma_key *key, void **remote)
{
    struct zn_p2p_dom *d = dom;
    struct ipc_key k;
    if (key->size != sizeof(k))
        return zn_error(ncclRemoteError, ZN_P2P,
                        "p2p: a key of %u bytes from rank %d is not a p2p IPC key (%zu bytes)",
                        key->size, peer, sizeof(k));
    memcpy(&k, key->data, sizeof(k));
    if ((int)k.owner != peer || k.off > k.alloc || k.len > k.alloc - k.off)
        return zn_error(ncclRemoteError, ZN_P2P,
                        "rank %d described a buffer of %llu bytes at offset %llu of an allocation "
                        "of %llu",
                        peer, (unsigned long long)k.len, (unsigned long long)k.off,
                        (unsigned long long)k.alloc);
    struct ipc_open *o = d->opened;
    while (o && !(o->peer == peer && o->base == k.base)) o = o->next;
    if (!o) {
        ZN_CHECK(zn_calloc(&o, 1, "p2p mapping"));
        ncclResult_t res = zn_cuda_ipc_open(k.handle, &o->ptr);
        if (res != ncclSuccess) {
            free(o);
            return res;
        }
        o->peer = peer;
        o->base = k.base;
        o->next = d->opened;
        d->opened = o;
    }
    struct ipc_remote *r;
    ZN_CHECK(zn_calloc(&r, 1, "p2p remote region"));
    *r = (struct ipc_remote){
        .ptr = (uint8_t *)o->ptr + k.off, .len = k.len, .owner = peer, .next = d->remotes
    };
    d->remotes = r;
    *remote = r;
    return ncclSuccess;
}

/* The allocation stays open until the domain closes (other regions may lie in it). */
ncclResult_t zn_p2p_dom_key_release(void *dom, void *remote)
{
    struct zn_p2p_dom *d = dom;
    for (struct ipc_remote **pp = &d->remotes; *pp; pp = &(*pp)->next)
        if (*pp == remote) {
            *pp = ((struct ipc_remote *)remote)->next;
            free(remote);
            break;
        }
    return ncclSuccess;
}

void *zn_p2p_dom_remote_addr(void *remote, size_t *len)
{
    const struct ipc_remote *r = remote;
    if (len) *len = r ? (size_t)r->len : 0;
    return r ? r->ptr : NULL;
}

ncclResult_t zn_p2p_dom_ep_open(void *dom, const struct zn_rma_ep_args *a, struct zn_conn **c,
                                struct zn_rma_key *desc)
{
    struct zn_p2p_dom *d = dom;
    if (a->peer < 0 || a->peer >= d->ctx.nranks || a->peer == d->ctx.rank)
        return zn_error(ncclInvalidArgument, ZN_P2P, "p2p: no connection to rank %d", a->peer);
    if (!d->stream) ZN_CHECK(zn_cuda_stream_create(&d->stream));
    struct ipc_ep *e;
    ZN_CHECK(zn_calloc(&e, 1, "p2p connection"));
    /* channel -1: a one-sided connection of a domain, not one of the main table's. */
    e->hdr = (struct zn_conn_hdr){ .ops = &zn_transport_p2p, .peer = a->peer, .channel = -1 };
    e->d = d;
    e->next = d->eps;
    d->eps = e;
    memset(desc, 0, sizeof(*desc));
    *c = (struct zn_conn *)e;
    return ncclSuccess;
}

void zn_p2p_dom_ep_close(struct zn_conn *c)
{
    struct ipc_ep *e = (struct ipc_ep *)c;
    if (!e) return;
    for (struct ipc_ep **pp = &e->d->eps; *pp; pp = &(*pp)->next)
        if (*pp == e) {
            *pp = e->next;
            break;
        }
    free(e);
}

/* Whether [off, off + len) lies inside a region of size bytes (no overflow). */
static int inside(size_t off, size_t len, size_t size)
{
    return off <= size && len <= size - off;
}

ncclResult_t zn_p2p_dom_put(struct zn_conn *c, void *local, size_t loff, void *remote, size_t roff,
                            size_t len)
{
    struct ipc_ep *e = (struct ipc_ep *)c;
    const struct ipc_region *l = local;
    const struct ipc_remote *r = remote;
    if (!l || !r || r->owner != e->hdr.peer)
        return zn_error(ncclInvalidArgument, ZN_P2P, "p2p: put toward rank %d with %s", e->hdr.peer,
                        !l   ? "a NULL local region"
                        : !r ? "a NULL remote region"
                             : "a region of another rank");
    if (!inside(loff, len, l->len) || !inside(roff, len, r->len))
        return zn_error(ncclInvalidArgument, ZN_P2P,
                        "p2p: put of %zu bytes from offset %zu to offset %zu leaves a region "
                        "(local %llu, remote %llu bytes)",
                        len, loff, roff, (unsigned long long)l->len, (unsigned long long)r->len);
    return zn_cuda_memcpy_dtod_async(r->ptr + roff, l->ptr + loff, len, e->d->stream);
}

/* A stream write of value, or a copy of it (pageable: the copy has taken it when the call
 * returns). */
ncclResult_t zn_p2p_dom_signal(struct zn_conn *c, void *remote, size_t roff, uint64_t value)
{
    struct ipc_ep *e = (struct ipc_ep *)c;
    const struct ipc_remote *r = remote;
    if (!r || r->owner != e->hdr.peer || roff % 8 || !inside(roff, 8, r->len))
        return zn_error(ncclInvalidArgument, ZN_P2P,
                        "p2p: signal toward rank %d at offset %zu: needs an 8-byte aligned word "
                        "inside a region of that rank",
                        e->hdr.peer, roff);
    if (!e->d->no_write64) {
        if (zn_cuda_write_value64(e->d->stream, r->ptr + roff, value) == 0) return ncclSuccess;
        e->d->no_write64 = 1;
        zn_log(ZN_LOG_INFO, ZN_P2P,
               "p2p: the driver cannot write a peer's signal word from a stream; signals are "
               "8-byte copies");
    }
    return zn_cuda_memcpy_async(r->ptr + roff, &value, sizeof(value), e->d->stream);
}

ncclResult_t zn_p2p_dom_flush(struct zn_conn *c)
{
    return zn_cuda_stream_sync(((struct ipc_ep *)c)->d->stream);
}
