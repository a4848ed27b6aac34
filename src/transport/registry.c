/* The transport registry and helpers shared by all transports. */
#include "transport.h"
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
