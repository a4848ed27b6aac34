/*
 * Which GPUs of a communicator reach each other's memory directly (NVLink or PCIe peer access),
 * and what a cuda communicator makes of it: every pair (direct kernels, every arena mapped by
 * every peer), a ring of GPUs that reach their neighbours (ring kernels), rings across hosts
 * whose hops between hosts the proxy carries, or none (staged through host memory).
 *
 * A reach matrix has n * n bytes, reach[a * n + b] = 1 where rank a's GPU maps rank b's memory.
 * Everything here decides from facts (bus ids, host hashes, the driver's answers through a
 * probe, reach bits), so that it runs without GPUs in the unit tests; the driver's calls are
 * util/cuda.h's.
 */
#ifndef ZN_TOPO_REACH_H
#define ZN_TOPO_REACH_H

#include "transport/transport.h"

#include <stddef.h>
#include <stdint.h>

/* The driver's answers that the reach matrix is judged from. */
struct zn_topo_gpu_probe {
    /* The local ordinal of the GPU with that bus id, -1 if this process does not see it. */
    int (*device_by_bus_id)(const char *bus_id);
    /* Whether device dev can map device peer's memory (dev != peer). */
    int (*can_access_peer)(int dev, int peer);
};

/* This machine's driver (util/cuda.h). */
extern const struct zn_topo_gpu_probe zn_topo_cuda_probe;

/* Which GPUs of the communicator can map each other's memory, as this process (rank me) sees
 * them: reach[a * n + b] for every pair (reach[a][a] = 1). Returns 0 (matrix all 0, reason in
 * why) when the p2p transport cannot be used at all: more than ZN_P2P_MAX_COMM ranks, or
 * p2p_disable (ZINC_P2P_DISABLE). Pairs on different hosts never reach each other (why says
 * "ranks on more than one host"); a process judges only the pairs of its own host and answers 1
 * for the pairs of other hosts, which their own ranks judge. peers[r].bus_id is rank r's GPU
 * ("0000:1b:00.0"): a GPU this process does not see (CUDA_VISIBLE_DEVICES) reaches no other.
 * why (empty on entry) gets the first reason some pair does not reach. Processes that see
 * different devices can answer differently: combine every rank's matrix
 * (zn_topo_reach_combine). */
int zn_topo_gpu_reach(const struct zn_peer_info *peers, int n, int me, int p2p_disable,
                      const struct zn_topo_gpu_probe *probe, uint8_t *reach, char *why, size_t len);

/* all = the AND of the n matrices each[r * n * n ...] (every rank's zn_topo_gpu_reach): a pair
 * reaches only if every rank said so. */
void zn_topo_reach_combine(const uint8_t *each, int n, uint8_t *all);

/* Whether every pair reaches the other. */
int zn_topo_reach_full(const uint8_t *reach, int n);

/* A cycle through all n ranks (n at most ZN_P2P_MAX_RANKS) whose consecutive members reach each
 * other both ways: order[pos] is the rank at ring position pos, order[0] = 0. A depth-first
 * search with neighbours tried in rank order, so every rank finds the same ring from the same
 * matrix. Returns 0 if there is none (for one rank: if reach[0] is 0, the transport is off). */
int zn_topo_gpu_ring(const uint8_t *reach, int n, int *order);

/* Across hosts: whether the ring (ring[pos], by host: zn_topo_host_ring) can run with the proxy
 * carrying its hops between hosts, i.e. whether every hop within a host reaches both ways. */
int zn_topo_ring_hops_reach(const struct zn_peer_info *peers, int n, const int *ring,
                            const uint8_t *reach);

/* Whether every two GPUs of each host reach each other (pairs on different hosts are not
 * asked). */
int zn_topo_hosts_reach(const struct zn_peer_info *peers, int n, const uint8_t *reach);

/* The peers whose arenas rank me maps (want[r], zn_p2p_create's, which ignores want[me]): the
 * ranks of its host, on a ring (ring_only) only its neighbours next and prev among them. */
void zn_topo_gpu_maps(const struct zn_peer_info *peers, int n, int me, int ring_only, int next,
                      int prev, uint8_t *want);

#endif
