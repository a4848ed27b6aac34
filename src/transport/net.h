/*
 * The net transport (transport over a net of src/net). The ops table is zn_transport_net
 * (transport.h); these are the few extra entry points tests use.
 */
#ifndef ZN_TRANSPORT_NET_H
#define ZN_TRANSPORT_NET_H

#include "net/net_layer.h"

/* The net that zn_transport_net.init chose for this state. */
const struct zn_net *zn_net_transport_net(void *state);
/* The listen handle of rank `rank` (this rank's own included), as allgathered at init. */
const void *zn_net_transport_handle(void *state, int rank);
/* Accepted connections closed so far because their HELLO was not one of this
 * communicator's (strays). */
int zn_net_transport_strays(void *state);

#endif
