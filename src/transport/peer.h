/*
 * What a rank knows about its peers: identity (host, pid) and, for peers on the same host,
 * whether they are still alive. Liveness matters on shared memory, where a dead peer does not
 * close anything: without it a survivor would spin until the deadline.
 */
#ifndef ZN_TRANSPORT_PEER_H
#define ZN_TRANSPORT_PEER_H

#include "transport.h"

/* Fill this process's entry (rank and cuda_dev are set by the caller). */
ncclResult_t zn_peer_info_local(struct zn_peer_info *info);

/* The host identity: ZINC_HOSTID if set, else a hash of host name, boot id and network
 * namespace (ranks in different network namespaces are treated as different hosts, which is
 * what the multi-host tests rely on). */
uint64_t zn_host_hash(void);
/* Rank r of a communicator: with ZINC_HOSTID a comma-separated list ("a,a,b,b"), the id at
 * r mod its length, so that the ranks of one process can be several hosts (for tests and
 * benchmarks of the paths between hosts with one process driving every GPU); else
 * zn_host_hash(). */
uint64_t zn_host_hash_rank(int rank);

struct zn_peer_watch;

/* Open a watch on every peer that shares this rank's host and pid namespace. Call right after
 * the peers' info was exchanged, while they are known to be alive. Each pidfd is opened at the
 * first zn_peer_dead about that peer (a rank asks about few of them). */
ncclResult_t zn_peer_watch_create(const struct zn_tctx *ctx, struct zn_peer_watch **out);
/* 1 if peer is known to have exited, 0 if alive or not watchable (another host or pid
 * namespace: the transports see that as a closed connection or a timeout). Cheap while the
 * peer lives: one poll() on a pidfd. An exit is confirmed through /proc before it is reported,
 * so a descriptor closed or reused elsewhere never condemns a live peer. */
int zn_peer_dead(struct zn_peer_watch *w, int peer);
void zn_peer_watch_destroy(struct zn_peer_watch *w);

#endif
