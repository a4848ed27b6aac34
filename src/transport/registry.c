/* The transport registry and helpers shared by all transports. */
#include "transport.h"
#include "gpu_peer.h"
#include "shm_arena.h"
#include "util/err.h"

#include <stdio.h>

const struct zn_transport_ops *const zn_transports[ZN_NTRANSPORTS] = {
    &zn_transport_shm,
    &zn_transport_net,
};

ncclResult_t zn_transport_check(const struct zn_transport_ops *t)
{
    const char *name = t->name ? t->name : "(unnamed)";
    if (t->size != sizeof(*t))
        return zn_error(ncclInternalError, ZN_INIT,
                        "transport %s has an operations table of %zu bytes, this build expects %zu",
                        name, t->size, sizeof(*t));
    const char *missing = !t->name          ? "name"
                          : !t->can_connect ? "can_connect"
                          : !t->init        ? "init"
                          : !t->connect     ? "connect"
                          : !t->isend       ? "isend"
                          : !t->irecv       ? "irecv"
                          : !t->progress    ? "progress"
                          : !t->abort       ? "abort"
                          : !t->fini        ? "fini"
                          : !t->query       ? "query"
                          : !t->reg         ? "reg"
                          : !t->dereg       ? "dereg"
                                            : NULL;
    if (missing)
        return zn_error(ncclInternalError, ZN_INIT, "transport %s leaves its %s slot empty", name,
                        missing);
    return ncclSuccess;
}

ncclResult_t zn_transport_rma_check(const struct zn_transport_rma_ops *t)
{
    const char *name = t->name ? t->name : "(unnamed)";
    if (t->size != sizeof(*t))
        return zn_error(ncclInternalError, ZN_INIT,
                        "transport %s has a one-sided table of %zu bytes, this build expects %zu",
                        name, t->size, sizeof(*t));
    const char *missing = !t->name              ? "name"
                          : !t->key_pack        ? "key_pack"
                          : !t->key_import      ? "key_import"
                          : !t->key_release     ? "key_release"
                          : !t->put             ? "put"
                          : !t->signal          ? "signal"
                          : !t->flush           ? "flush"
                          : !t->domain_open     ? "domain_open"
                          : !t->domain_close    ? "domain_close"
                          : !t->mem_alloc       ? "mem_alloc"
                          : !t->mem_free        ? "mem_free"
                          : !t->mem_reg         ? "mem_reg"
                          : !t->mem_dereg       ? "mem_dereg"
                          : !t->remote_addr     ? "remote_addr"
                          : !t->ep_open         ? "ep_open"
                          : !t->ep_connect      ? "ep_connect"
                          : !t->ep_establish    ? "ep_establish"
                          : !t->put_signal      ? "put_signal"
                          : !t->domain_progress ? "domain_progress"
                          : !t->ep_check        ? "ep_check"
                          : !t->ep_close        ? "ep_close"
                                                : NULL;
    if (missing)
        return zn_error(ncclInternalError, ZN_INIT,
                        "transport %s leaves its one-sided %s slot empty", name, missing);
    return ncclSuccess;
}

/* The one-sided stubs: the message names the transport where the call says which one. */
static ncclResult_t rma_missing(const struct zn_conn *c, const char *op)
{
    const struct zn_conn_hdr *h = (const struct zn_conn_hdr *)c;
    return zn_transport_unsupported(h && h->ops ? h->ops->name : "(this one)", op);
}

static ncclResult_t key_pack_unsupported(void *state, void *handle, struct zn_rma_key *key)
{
    return zn_error(ncclInvalidUsage, ZN_NET,
                    "this transport has no one-sided operations (key_pack)");
}

static ncclResult_t key_import_unsupported(void *state, int peer, const struct zn_rma_key *key,
                                           void **remote)
{
    return zn_error(ncclInvalidUsage, ZN_NET,
                    "this transport has no one-sided operations (key_import)");
}

static ncclResult_t key_release_unsupported(void *state, void *remote)
{
    return zn_error(ncclInvalidUsage, ZN_NET,
                    "this transport has no one-sided operations (key_release)");
}

static ncclResult_t put_unsupported(struct zn_conn *c, void *local, size_t loff, void *remote,
                                    size_t roff, size_t len)
{
    return rma_missing(c, "one-sided put");
}

static ncclResult_t signal_unsupported(struct zn_conn *c, void *remote, size_t roff, uint64_t value)
{
    return rma_missing(c, "one-sided signal");
}

static ncclResult_t flush_unsupported(struct zn_conn *c)
{
    return rma_missing(c, "one-sided flush");
}

/* The second version's slots, for a table without one-sided use on its own: domain_open is
 * the one entry point, so only it says why; the rest cannot be reached without a domain. */
ncclResult_t zn_rma_domain_open_unsupported(const struct zn_tctx *ctx, void **dom)
{
    return zn_error(ncclInvalidUsage, ZN_NET,
                    "this transport has no one-sided connections of their own (domain_open)");
}

void zn_rma_domain_close_unsupported(void *dom) {}

ncclResult_t zn_rma_mem_alloc_unsupported(void *dom, size_t len, int nmappers, void **ptr,
                                          void **handle)
{
    return zn_transport_unsupported("(this one)", "one-sided mem_alloc");
}

void zn_rma_mem_free_unsupported(void *dom, void *handle) {}

ncclResult_t zn_rma_mem_reg_unsupported(void *dom, void *buf, size_t len, void **handle)
{
    return zn_transport_unsupported("(this one)", "one-sided mem_reg");
}

void zn_rma_mem_dereg_unsupported(void *dom, void *handle) {}

void *zn_rma_remote_addr_unsupported(void *remote, size_t *len)
{
    if (len) *len = 0;
    return NULL;
}

ncclResult_t zn_rma_ep_open_unsupported(void *dom, const struct zn_rma_ep_args *a,
                                        struct zn_conn **c, struct zn_rma_key *desc)
{
    return zn_transport_unsupported("(this one)", "one-sided ep_open");
}

ncclResult_t zn_rma_ep_connect_unsupported(struct zn_conn *c, const struct zn_rma_key *peer_desc,
                                           size_t peer_len)
{
    return rma_missing(c, "one-sided ep_connect");
}

ncclResult_t zn_rma_ep_establish_unsupported(struct zn_conn *c, int *done)
{
    return rma_missing(c, "one-sided ep_establish");
}

ncclResult_t zn_rma_put_signal_unsupported(struct zn_conn *c, void *local, size_t loff,
                                           void *remote, size_t roff, size_t len, void *sremote,
                                           size_t sroff, uint64_t value)
{
    return rma_missing(c, "one-sided put_signal");
}

void zn_rma_domain_progress_unsupported(void *dom) {}

ncclResult_t zn_rma_ep_check_unsupported(struct zn_conn *c, const char *fn, int *closed)
{
    return rma_missing(c, "one-sided ep_check");
}

void zn_rma_ep_close_unsupported(struct zn_conn *c) {}

const struct zn_transport_rma_ops zn_transport_rma_unsupported = {
    .size = sizeof(struct zn_transport_rma_ops),
    .name = "unsupported",
    .key_pack = key_pack_unsupported,
    .key_import = key_import_unsupported,
    .key_release = key_release_unsupported,
    .put = put_unsupported,
    .signal = signal_unsupported,
    .flush = flush_unsupported,
    ZN_RMA_V2_UNSUPPORTED,
};

/* Looked up here rather than through slots of the main table, so that transports without these
 * capabilities (socket) need no change. */
const struct zn_transport_rma_ops *zn_transport_rma(const struct zn_transport_ops *t)
{
    return t == &zn_transport_p2p   ? &zn_p2p_rma
           : t == &zn_transport_shm ? &zn_shm_rma
           : t == &zn_transport_net ? &zn_transport_net_rma
                                    : &zn_transport_rma_unsupported;
}

const struct zn_transport_collmem_ops *zn_transport_collmem(const struct zn_transport_ops *t)
{
    return t == &zn_transport_shm   ? &zn_shm_collmem
           : t == &zn_transport_p2p ? &zn_p2p_collmem
                                    : NULL;
}

ncclResult_t zn_transport_reg_unsupported(void *state, void *buf, size_t len, void **handle)
{
    return zn_error(ncclInvalidUsage, ZN_NET, "this transport does not register memory");
}

ncclResult_t zn_transport_dereg_unsupported(void *state, void *handle)
{
    return zn_error(ncclInvalidUsage, ZN_NET, "this transport does not register memory");
}

void zn_peer_str(const struct zn_tctx *ctx, int peer, char *buf, size_t len)
{
    if (peer < 0 || peer >= ctx->nranks) {
        snprintf(buf, len, "rank %d", peer);
        return;
    }
    const struct zn_peer_info *p = &ctx->peers[peer];
    snprintf(buf, len, "rank %d (%s, pid %d)", peer, p->hostname, (int)p->pid);
}

ncclResult_t zn_transport_unsupported(const char *transport, const char *op)
{
    return zn_error(ncclInvalidUsage, ZN_NET, "transport %s does not support %s", transport, op);
}
