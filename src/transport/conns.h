/*
 * A communicator's connections: which transport serves each peer, and the connections opened
 * so far (on first use), per channel.
 */
#ifndef ZN_TRANSPORT_CONNS_H
#define ZN_TRANSPORT_CONNS_H

#include "transport.h"

struct zn_conns;

/* Choose a transport per peer (shm for same-host peers unless ZINC_SHM_DISABLE=1 or
 * ZINC_TRANSPORT=socket; the net transport otherwise) and initialise the transports in use. Collective:
 * every rank calls it at init. ctx must outlive the result. */
ncclResult_t zn_conns_create(const struct zn_tctx *ctx, struct zn_conns **out);
/* The connection to peer on channel, started on first use. Never blocks. */
ncclResult_t zn_conns_get(struct zn_conns *c, int peer, int channel, struct zn_conn **out);
const struct zn_transport_ops *zn_conns_transport(const struct zn_conns *c, int peer);
/* Whether any peer uses shm (for the cost model). */
int zn_conns_uses_shm(const struct zn_conns *c);
/* This rank failed: tell every connected peer why (transport abort ops). */
void zn_conns_abort(struct zn_conns *c, const char *msg);
void zn_conns_destroy(struct zn_conns *c);

static inline const struct zn_transport_ops *zn_conn_ops(const struct zn_conn *c)
{
    return ((const struct zn_conn_hdr *)c)->ops;
}

#endif
