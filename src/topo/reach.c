/*
 * GPU reach matrix and rings (see reach.h).
 */
#include "reach.h"
#include "transport/gpu_peer.h"
#include "util/cuda.h"

#include <stdio.h>
#include <string.h>

const struct zn_topo_gpu_probe zn_topo_cuda_probe = {
    .device_by_bus_id = zn_cuda_device_by_bus_id,
    .can_access_peer = zn_cuda_can_access_peer,
};

int zn_topo_gpu_reach(const struct zn_peer_info *peers, int n, int me, int p2p_disable,
                      const struct zn_topo_gpu_probe *probe, uint8_t *reach, char *why, size_t len)
{
    memset(reach, 0, (size_t)n * (size_t)n);
    if (p2p_disable) {
        snprintf(why, len, "ZINC_P2P_DISABLE=1");
        return 0;
    }
    if (n > ZN_P2P_MAX_COMM) {
        snprintf(why, len, "more than %d GPUs", ZN_P2P_MAX_COMM);
        return 0;
    }
    uint64_t mine = peers[me].host_hash;
    for (int r = 0; r < n; r++)
        if (peers[r].host_hash != mine && !*why) snprintf(why, len, "ranks on more than one host");
    /* Each GPU of this host as this process sees it (the devices of one host are visible to all
     * its processes unless CUDA_VISIBLE_DEVICES hides them; then the pair is treated as not
     * capable). */
    int dev[ZN_P2P_MAX_COMM];
    for (int r = 0; r < n; r++)
        dev[r] = peers[r].host_hash == mine ? probe->device_by_bus_id(peers[r].bus_id) : -1;
    for (int a = 0; a < n; a++) {
        uint64_t ha = peers[a].host_hash;
        for (int b = 0; b < n; b++) {
            if (peers[b].host_hash != ha) continue; /* 0: a net hop at best */
            if (ha != mine) {
                reach[a * n + b] = 1; /* their host's ranks judge */
                continue;
            }
            reach[a * n + b] =
                a == b || (dev[a] >= 0 && dev[b] >= 0 &&
                           (dev[a] == dev[b] || probe->can_access_peer(dev[a], dev[b])));
            if (!reach[a * n + b] && !*why)
                snprintf(why, len, "GPU %s cannot access GPU %s", peers[a].bus_id, peers[b].bus_id);
        }
    }
    return 1;
}

void zn_topo_reach_combine(const uint8_t *each, int n, uint8_t *all)
{
    size_t nn = (size_t)n * (size_t)n;
    memset(all, 1, nn);
    for (int r = 0; r < n; r++)
        for (size_t i = 0; i < nn; i++) all[i] &= each[(size_t)r * nn + i];
}

int zn_topo_reach_full(const uint8_t *reach, int n)
{
    int full = 1;
    for (int i = 0; i < n * n; i++) full &= reach[i];
    return full;
}

/* Depth-first search for a cycle through every rank, neighbours tried in rank order, so every
 * rank finds the same one from the same matrix. */
static int ring_dfs(const uint8_t *reach, int n, int *order, int depth, uint32_t used)
{
    if (depth == n) return reach[order[n - 1] * n + order[0]] && reach[order[0] * n + order[n - 1]];
    for (int r = 1; r < n; r++) {
        int last = order[depth - 1];
        if ((used >> r) & 1 || !reach[last * n + r] || !reach[r * n + last]) continue;
        order[depth] = r;
        if (ring_dfs(reach, n, order, depth + 1, used | (1u << r))) return 1;
    }
    return 0;
}

int zn_topo_gpu_ring(const uint8_t *reach, int n, int *order)
{
    if (n < 1 || n > ZN_P2P_MAX_RANKS) return 0;
    order[0] = 0;
    /* One rank: a "ring" only if its GPU is usable at all (zn_topo_gpu_reach leaves the
     * diagonal 0 when the p2p transport is off, e.g. ZINC_P2P_DISABLE=1). */
    return n == 1 ? reach[0] != 0 : ring_dfs(reach, n, order, 1, 1u);
}

int zn_topo_ring_hops_reach(const struct zn_peer_info *peers, int n, const int *ring,
                            const uint8_t *reach)
{
    for (int i = 0; i < n; i++) {
        int a = ring[i], b = ring[(i + 1) % n];
        if (peers[a].host_hash == peers[b].host_hash && !(reach[a * n + b] && reach[b * n + a]))
            return 0;
    }
    return 1;
}

int zn_topo_hosts_reach(const struct zn_peer_info *peers, int n, const uint8_t *reach)
{
    for (int a = 0; a < n; a++)
        for (int b = 0; b < n; b++)
            if (a != b && peers[a].host_hash == peers[b].host_hash && !reach[a * n + b]) return 0;
    return 1;
}

void zn_topo_gpu_maps(const struct zn_peer_info *peers, int n, int me, int ring_only, int next,
                      int prev, uint8_t *want)
{
    for (int r = 0; r < n; r++)
        want[r] =
            (!ring_only || r == next || r == prev) && peers[r].host_hash == peers[me].host_hash;
}
