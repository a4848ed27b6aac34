/*
 * The socket transport (TCP between any two ranks). The ops table is zn_transport_socket
 * (transport.h); these are the few extra entry points tests use.
 */
#ifndef ZN_TRANSPORT_SOCKET_H
#define ZN_TRANSPORT_SOCKET_H

#include "util/sock.h"

/* The transport listener of rank `rank` (this rank's own included), as allgathered at init;
 * state is what zn_transport_socket.init returned. For tests that connect to it directly. */
const union zn_sockaddr *zn_socket_listen_addr(void *state, int rank);

/* This rank's transport listener port. */
int zn_socket_listen_port(void *state);

#endif
