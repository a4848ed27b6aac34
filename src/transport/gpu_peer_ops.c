/*
 * The p2p transport's tables: the main one (zn_transport_p2p), its collective memory (the GPU
 * arenas of gpu_peer.c) and its one-sided operations, host-driven: puts are cudaMemcpyAsync copies
 * into the peer's allocation mapped in this process, on a stream per connection.
 *
 * The transport carries no messages (isend / irecv are unsupported): kernels move the data of
 * collectives through the arenas, and registered buffers are mapped by every peer for
 * zero-copy kernels and one-sided puts.
 */
#include "gpu_peer.h"
#include "util/err.h"
#include "util/param.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct p2p_conn {
    struct zn_conn_hdr hdr;
    void *stream; /* puts and signals toward hdr.peer, in issue order */
};

struct p2p_state {
    uint64_t magic; /* 0: not a one-sided domain (gpu_peer_rma.c's begin with ZN_P2P_DOM_MAGIC) */
    struct zn_tctx ctx;
    int dev;
    struct zn_p2p_reg *svc; /* maps the buffers peers register */
    struct zn_reg_table regs;
    struct p2p_conn *conn[ZN_P2P_MAX_RANKS];
};

static int p2p_can_connect(const struct zn_tctx *ctx, int peer)
{
    if (peer == ctx->rank || ctx->nranks > ZN_P2P_MAX_RANKS || zn_params()->p2p_disable) return 0;
    const struct zn_peer_info *me = &ctx->peers[ctx->rank], *p = &ctx->peers[peer];
    if (me->host_hash != p->host_hash || me->cuda_dev < 0 || p->cuda_dev < 0) return 0;
    int a = zn_cuda_device_by_bus_id(me->bus_id), b = zn_cuda_device_by_bus_id(p->bus_id);
    return a >= 0 && b >= 0 && zn_cuda_can_access_peer(a, b);
}

/* The registration service runs from here to fini, on this rank's GPU (its peer info):
 * peers map what this rank registers. */
static ncclResult_t p2p_init(const struct zn_tctx *ctx, void **state)
{
    if (ctx->nranks > ZN_P2P_MAX_RANKS)
        return zn_error(ncclInvalidUsage, ZN_P2P, "p2p: more than %d ranks", ZN_P2P_MAX_RANKS);
    int dev = ctx->peers[ctx->rank].cuda_dev;
    if (dev < 0) return zn_error(ncclInvalidUsage, ZN_P2P, "p2p: rank %d has no GPU", ctx->rank);
    struct p2p_state *s = calloc(1, sizeof(*s));
    if (!s) return zn_error(ncclSystemError, ZN_P2P, "out of memory");
    s->ctx = *ctx;
    s->dev = dev;
    ncclResult_t res = zn_p2p_reg_start(ctx, s->dev, &s->svc);
    if (res != ncclSuccess) {
        free(s);
        return res;
    }
    *state = s;
    return ncclSuccess;
}

static ncclResult_t p2p_connect(void *state, int peer, int channel, struct zn_conn **conn)
{
    struct p2p_state *s = state;
    if (peer < 0 || peer >= s->ctx.nranks || peer == s->ctx.rank)
        return zn_error(ncclInvalidArgument, ZN_P2P, "p2p: no connection to rank %d", peer);
    if (!s->conn[peer]) {
        struct p2p_conn *c = calloc(1, sizeof(*c));
        if (!c) return zn_error(ncclSystemError, ZN_P2P, "out of memory");
        c->hdr = (struct zn_conn_hdr){ .ops = &zn_transport_p2p, .peer = peer, .channel = channel };
        ncclResult_t res = zn_cuda_stream_create(&c->stream);
        if (res != ncclSuccess) {
            free(c);
            return res;
        }
        s->conn[peer] = c;
    }
    *conn = (struct zn_conn *)s->conn[peer];
    return ncclSuccess;
}

static ncclResult_t p2p_isend(struct zn_conn *c, const void *buf, size_t len, struct zn_req *req)
{
    return zn_transport_unsupported("p2p", "isend (two-sided messages go by shm or socket)");
}

static ncclResult_t p2p_irecv(struct zn_conn *c, void *buf, size_t len, struct zn_req *req)
{
    return zn_transport_unsupported("p2p", "irecv (two-sided messages go by shm or socket)");
}

/* Nothing to move: puts run on the connection's stream, flush waits for them. */
static ncclResult_t p2p_progress(struct zn_conn *c, int *progressed)
{
    return ncclSuccess;
}

/* Peers learn of a failure through the arenas' abort words and the kernels' error word. */
static void p2p_abort(void *state, const char *msg) {}

static void p2p_fini(void *state)
{
    struct p2p_state *s = state;
    if (!s) return;
    for (int r = 0; r < ZN_P2P_MAX_RANKS; r++) {
        if (!s->conn[r]) continue;
        zn_cuda_stream_sync(s->conn[r]->stream);
        zn_cuda_stream_destroy(s->conn[r]->stream);
        free(s->conn[r]);
    }
    /* Registrations still held need no word to the peers: each peer's service unmaps what it
     * imported when it stops (its communicator's end), and a peer may be gone already. */
    zn_p2p_reg_stop(s->svc);
    zn_reg_fini(&s->regs);
    free(s);
}

static void p2p_query(const struct zn_tctx *ctx, int peer, struct zn_transport_props *props)
{
    /* Latency of a host-issued copy; bandwidth of a PCIe 4 x16 link, the least it runs on. */
    *props = (struct zn_transport_props){ .caps = ZN_TCAP_REG | ZN_TCAP_RMA | ZN_TCAP_COLLMEM,
                                          .latency_us = 10.0,
                                          .bw = 20000.0 };
}

/* Share buf's cuMem allocation with every peer and record it. Memory that cannot be shared
 * (not exportable cuMem) is not registered: *handle NULL, success. */
static ncclResult_t p2p_reg(void *state, void *buf, size_t len, void **handle)
{
    struct p2p_state *s = state;
    struct zn_cumem m;
    int fd = -1;
    *handle = NULL;
    if (!len || zn_cumem_find(buf, &m) != 0) return ncclSuccess;
    int cur = zn_cuda_enter(s->dev);
    if (cur < 0) ZN_CHECK(zn_cuda_set_device(s->dev));
    struct zn_reg_entry *e = NULL;
    ncclResult_t res = zn_cumem_export_fd(&m, &fd);
    if (res != ncclSuccess) {
        zn_info(ZN_P2P, "p2p: %p is not exportable cuMem memory (%s): not registered", buf,
                zn_last_error());
        zn_clear_last_error();
        res = ncclSuccess;
        goto restore_device;
    }
    struct zn_reg_entry r = { .lo = (uintptr_t)buf,
                              .hi = (uintptr_t)buf + len,
                              .base = (uintptr_t)m.ptr,
                              .alloc_size = m.size };
    r.peer[s->ctx.rank] = m.ptr;
    ZN_CHECK_GOTO(zn_reg_add(&s->regs, &r, &e), res, close_fd);
    res = zn_p2p_reg_share(&s->ctx, fd, m.size, e->id, e->peer);
    if (res != ncclSuccess) {
        zn_reg_remove(&s->regs, e->id);
        goto close_fd;
    }
    *handle = e;
close_fd:
    close(fd);
restore_device:
    zn_cuda_leave(s->dev, cur);
    return res;
}

static ncclResult_t p2p_dereg(void *state, void *handle)
{
    struct p2p_state *s = state;
    struct zn_reg_entry *e = handle;
    if (!e) return ncclSuccess;
    /* The peers' kernels read and write this buffer through their mappings until this rank's
     * kernels of the same calls end (their end barrier): wait for those before the peers unmap
     * it. */
    int cur = zn_cuda_enter(s->dev);
    zn_cuda_device_sync();
    zn_cuda_leave(s->dev, cur);
    uint32_t id = e->id;
    zn_reg_remove(&s->regs, id);
    zn_p2p_reg_unshare(&s->ctx, id, -1);
    return ncclSuccess;
}

const struct zn_transport_ops zn_transport_p2p = {
    .size = sizeof(struct zn_transport_ops),
    .name = "p2p",
    .can_connect = p2p_can_connect,
    .init = p2p_init,
    .connect = p2p_connect,
    .isend = p2p_isend,
    .irecv = p2p_irecv,
    .progress = p2p_progress,
    .abort = p2p_abort,
    .fini = p2p_fini,
    .query = p2p_query,
    .reg = p2p_reg,
    .dereg = p2p_dereg,
};

const struct zn_reg_table *zn_p2p_regs(void *state)
{
    return state ? &((struct p2p_state *)state)->regs : NULL;
}

/* --- Collective memory: the arenas ----------------------------------------------------- */

static ncclResult_t collmem_create(const struct zn_tctx *ctx, const struct zn_collmem_args *args,
                                   void **mem)
{
    /* Every peer (want NULL) on one host's GPUs; across hosts, the peers the caller names. */
    uint8_t every[ZN_P2P_MAX_COMM];
    int cap = args->want ? ZN_P2P_MAX_COMM : ZN_P2P_MAX_RANKS;
    if (ctx->nranks > cap)
        return zn_error(ncclInvalidUsage, ZN_P2P, "p2p: more than %d ranks", cap);
    memset(every, 1, sizeof(every));
    struct zn_p2p *p = NULL;
    ZN_CHECK(zn_p2p_create(ctx, args->dev, args->bytes, args->want ? args->want : every, &p));
    *mem = p;
    return ncclSuccess;
}

static void collmem_destroy(void *mem)
{
    zn_p2p_destroy(mem);
}

const struct zn_transport_collmem_ops zn_p2p_collmem = {
    .size = sizeof(struct zn_transport_collmem_ops),
    .name = "p2p",
    .create = collmem_create,
    .destroy = collmem_destroy,
};

/* --- One-sided operations -----------------------------------------------------------------
 * A registered region is mapped by every peer when it is registered (p2p_reg), so its key
 * carries where each rank maps the allocation, and importing it picks this rank's entry. put
 * and signal are cudaMemcpyAsync copies on the connection's stream (into the peer's memory
 * mapped here; the signal word from this rank's pageable stack), so they complete in issue
 * order; flush waits for the stream. */

struct p2p_key {
    uint32_t id;
    uint32_t owner;
    uint64_t off; /* of the region in its allocation */
    uint64_t len;
    uint64_t peer[ZN_REG_MAX_RANKS]; /* the allocation as each rank maps it */
};
_Static_assert(sizeof(struct p2p_key) <= ZN_RMA_KEY_MAX, "a p2p key fits in zn_rma_key");

/* A peer's region as this rank reaches it. */
struct p2p_remote {
    uint8_t *ptr;
    size_t len;
    int owner;
};

static ncclResult_t rma_key_pack(void *state, void *handle, struct zn_rma_key *key)
{
    if (zn_p2p_is_dom(state)) return zn_p2p_dom_key_pack(state, handle, key);
    const struct zn_reg_entry *e = handle;
    if (!e) return zn_error(ncclInvalidArgument, ZN_P2P, "p2p: key_pack of a NULL handle");
    struct p2p_key k = { .id = e->id,
                         .owner = (uint32_t)((struct p2p_state *)state)->ctx.rank,
                         .off = e->lo - e->base,
                         .len = e->hi - e->lo };
    for (int r = 0; r < ZN_REG_MAX_RANKS; r++) k.peer[r] = (uint64_t)(uintptr_t)e->peer[r];
    memset(key, 0, sizeof(*key));
    key->size = sizeof(k);
    memcpy(key->data, &k, sizeof(k));
    return ncclSuccess;
}

static ncclResult_t rma_key_import(void *state, int peer, const struct zn_rma_key *key,
                                   void **remote)
{
    if (zn_p2p_is_dom(state)) return zn_p2p_dom_key_import(state, peer, key, remote);
    struct p2p_key k;
    int me = ((struct p2p_state *)state)->ctx.rank;
    if (key->size != sizeof(k))
        return zn_error(ncclInvalidArgument, ZN_P2P,
                        "p2p: a key of %u bytes from rank %d is not a p2p key (%zu bytes)",
                        key->size, peer, sizeof(k));
    memcpy(&k, key->data, sizeof(k));
    if ((int)k.owner != peer || !k.peer[me])
        return zn_error(ncclInvalidArgument, ZN_P2P,
                        "p2p: the key from rank %d names a region of rank %u that this rank has "
                        "not mapped",
                        peer, k.owner);
    struct p2p_remote *r = malloc(sizeof(*r));
    if (!r) return zn_error(ncclSystemError, ZN_P2P, "out of memory");
    *r = (struct p2p_remote){ .ptr = (uint8_t *)(uintptr_t)k.peer[me] + k.off,
                              .len = k.len,
                              .owner = peer };
    *remote = r;
    return ncclSuccess;
}

static ncclResult_t rma_key_release(void *state, void *remote)
{
    if (zn_p2p_is_dom(state)) return zn_p2p_dom_key_release(state, remote);
    free(remote);
    return ncclSuccess;
}

/* Whether [off, off + len) lies inside a region of size bytes (no overflow). */
static int inside(size_t off, size_t len, size_t size)
{
    return off <= size && len <= size - off;
}

static ncclResult_t rma_put(struct zn_conn *c, void *local, size_t loff, void *remote, size_t roff,
                            size_t len)
{
    /* A domain's connection (channel -1): gpu_peer_rma.c. One comparison on the data path. */
    if (((struct zn_conn_hdr *)c)->channel < 0)
        return zn_p2p_dom_put(c, local, loff, remote, roff, len);
    struct p2p_conn *v = (struct p2p_conn *)c;
    const struct zn_reg_entry *e = local;
    struct p2p_remote *r = remote;
    if (!e || !r)
        return zn_error(ncclInvalidArgument, ZN_P2P, "p2p: put with a NULL %s",
                        !e ? "local region" : "remote region");
    if (r->owner != v->hdr.peer)
        return zn_error(ncclInvalidArgument, ZN_P2P,
                        "p2p: put toward rank %d into a region of rank %d", v->hdr.peer, r->owner);
    if (!inside(loff, len, e->hi - e->lo) || !inside(roff, len, r->len))
        return zn_error(ncclInvalidArgument, ZN_P2P,
                        "p2p: put of %zu bytes from offset %zu to offset %zu leaves a region "
                        "(local %zu, remote %zu bytes)",
                        len, loff, roff, (size_t)(e->hi - e->lo), r->len);
    if (!len) return ncclSuccess;
    return zn_cuda_memcpy_async(r->ptr + roff, (const uint8_t *)e->lo + loff, len, v->stream);
}

static ncclResult_t rma_signal(struct zn_conn *c, void *remote, size_t roff, uint64_t value)
{
    if (((struct zn_conn_hdr *)c)->channel < 0) return zn_p2p_dom_signal(c, remote, roff, value);
    struct p2p_conn *v = (struct p2p_conn *)c;
    struct p2p_remote *r = remote;
    if (!r || r->owner != v->hdr.peer || roff % 8 || !inside(roff, 8, r->len))
        return zn_error(ncclInvalidArgument, ZN_P2P,
                        "p2p: signal toward rank %d at offset %zu: needs an 8-byte aligned word "
                        "inside a region of that rank",
                        v->hdr.peer, roff);
    /* value is pageable: the copy has taken it when the call returns. */
    return zn_cuda_memcpy_async(r->ptr + roff, &value, sizeof(value), v->stream);
}

static ncclResult_t rma_flush(struct zn_conn *c)
{
    if (((struct zn_conn_hdr *)c)->channel < 0) return zn_p2p_dom_flush(c);
    struct p2p_conn *v = (struct p2p_conn *)c;
    return zn_cuda_stream_sync(v->stream);
}

/* Nothing to exchange on a domain's connection: regions travel as keys. */
static ncclResult_t rma_ep_connect(struct zn_conn *c, const struct zn_rma_key *peer_desc,
                                   size_t peer_len)
{
    return ncclSuccess;
}

static ncclResult_t rma_ep_establish(struct zn_conn *c, int *done)
{
    *done = 1;
    return ncclSuccess;
}

static ncclResult_t rma_put_signal(struct zn_conn *c, void *local, size_t loff, void *remote,
                                   size_t roff, size_t len, void *sremote, size_t sroff,
                                   uint64_t value)
{
    ZN_CHECK(rma_put(c, local, loff, remote, roff, len));
    return rma_signal(c, sremote, sroff, value);
}

/* Copies run on the stream by themselves. */
static void rma_domain_progress(void *dom) {}

/* A peer that exited closes nothing here: the caller's peer watch sees it. */
static ncclResult_t rma_ep_check(struct zn_conn *c, const char *fn, int *closed)
{
    if (closed) *closed = 0;
    return ncclSuccess;
}

const struct zn_transport_rma_ops zn_p2p_rma = {
    .size = sizeof(struct zn_transport_rma_ops),
    .name = "p2p",
    .key_pack = rma_key_pack,
    .key_import = rma_key_import,
    .key_release = rma_key_release,
    .put = rma_put,
    .signal = rma_signal,
    .flush = rma_flush,
    .domain_open = zn_p2p_dom_open,
    .domain_close = zn_p2p_dom_close,
    .mem_alloc = zn_p2p_dom_mem_alloc,
    .mem_free = zn_p2p_dom_mem_free,
    .mem_reg = zn_p2p_dom_mem_reg,
    .mem_dereg = zn_p2p_dom_mem_dereg,
    .remote_addr = zn_p2p_dom_remote_addr,
    .ep_open = zn_p2p_dom_ep_open,
    .ep_connect = rma_ep_connect,
    .ep_establish = rma_ep_establish,
    .put_signal = rma_put_signal,
    .domain_progress = rma_domain_progress,
    .ep_check = rma_ep_check,
    .ep_close = zn_p2p_dom_ep_close,
};
