/*
 * The proxy of a process: one service thread that answers local ranks' requests on a Unix
 * socket (service.c), and one progress thread that drives net transfers posted by the ranks
 * (progress.c). Both start with the first communicator that needs them and stop when the last one
 * lets go (zn_proxy_acquire / zn_proxy_release, refcounted and thread-safe).
 *
 * The socket is in the abstract namespace (nothing to clean up if the process dies), named
 * "zinc-proxy-<pid namespace>-<pid>" so that a peer rank finds it from the peer info it already
 * has. Only processes of the same user are served (SO_PEERCRED). A client that does not speak
 * the protocol (garbage, another version, a length out of bounds) is closed and logged, and so is
 * one that stalls mid-request for ZINC_TIMEOUT seconds; the others are served meanwhile, since
 * the thread never blocks on one client.
 */
#ifndef ZN_PROXY_SERVICE_H
#define ZN_PROXY_SERVICE_H

#include "transport/svc.h"

#include <stdint.h>
#include <sys/socket.h>
#include <sys/un.h>

/* Start the proxy's threads (first call) or count one more user. */
ncclResult_t zn_proxy_acquire(void);
/* One user fewer; the last one stops the threads (handlers must have been removed). */
void zn_proxy_release(void);

/* The service as transports see it, for zn_tctx.svc. */
const struct zn_svc *zn_proxy_svc(void);

/* The socket address of process pid's service (pid_ns: its pid namespace inode). */
void zn_proxy_addr(int32_t pid, uint64_t pid_ns, struct sockaddr_un *a, socklen_t *len);

/* This process's pid namespace inode (0 if unknown). */
uint64_t zn_proxy_pid_ns(void);

/* Print the proxy's state to the log (what ZINC_PROXY_DUMP_SIGNAL triggers). Called on the
 * service thread, which owns the client list it prints. */
void zn_proxy_dump(void);

#endif
