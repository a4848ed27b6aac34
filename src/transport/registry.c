/* The transport registry and helpers shared by all transports. */
#include "transport.h"
#include "util/err.h"

#include <stdio.h>

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
