/*
 * Hosts of a communicator: which ranks share one (equal host hashes of their peer info), the
 * order in which a ring visits them, a rank's place on its host. Pure functions of the peer
 * info every rank has after the exchange at init, so every rank computes the same answers.
 */
#ifndef ZN_TOPO_HOSTS_H
#define ZN_TOPO_HOSTS_H

#include "transport/transport.h"

#include <stdint.h>

/* host[r]: the index of rank r's host, hosts numbered in order of first appearance (by rank);
 * *nhosts. O(n): an open-addressing table of host hashes (comparing every pair made init
 * O(n^2) per rank). */
ncclResult_t zn_topo_hosts(const struct zn_peer_info *peers, int n, int *host, int *nhosts);

/* The ring order of the ranks: ring[pos] is the rank at position pos, the ranks of one host next
 * to each other (in rank order) and the hosts in order of first appearance, so that a ring
 * crosses between hosts only nhosts times. *nhosts, *nlocal (the ranks on me's host) and *pos
 * (me's position) too. */
ncclResult_t zn_topo_host_ring(const struct zn_peer_info *peers, int n, int me, int *ring,
                               int *nhosts, int *nlocal, int *pos);

/* me's place among the ranks of its host, in rank order. */
int zn_topo_local_index(const struct zn_peer_info *peers, int me);

/* Bit r for every rank r < n on another host than me (n at most 64). */
uint64_t zn_topo_remote_ranks(const struct zn_peer_info *peers, int n, int me);

#endif
