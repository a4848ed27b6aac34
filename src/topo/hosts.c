/*
 * Hosts of a communicator (see hosts.h).
 */
#include "hosts.h"
#include "util/err.h"

#include <stdlib.h>

ncclResult_t zn_topo_hosts(const struct zn_peer_info *peers, int n, int *host, int *nhosts)
{
    size_t cap = 16;
    while (cap < 2 * (size_t)n) cap *= 2;
    int *slot = malloc(cap * sizeof(int)); /* a rank of that host, or -1 */
    if (!slot) return zn_error(ncclSystemError, ZN_INIT, "out of memory");
    for (size_t i = 0; i < cap; i++) slot[i] = -1;
    int count = 0;
    for (int r = 0; r < n; r++) {
        uint64_t h = peers[r].host_hash;
        size_t i = (size_t)((h * 0x9e3779b97f4a7c15ull) >> 32) & (cap - 1);
        while (slot[i] >= 0 && peers[slot[i]].host_hash != h) i = (i + 1) & (cap - 1);
        if (slot[i] < 0) {
            slot[i] = r;
            host[r] = count++;
        } else {
            host[r] = host[slot[i]];
        }
    }
    free(slot);
    *nhosts = count;
    return ncclSuccess;
}

ncclResult_t zn_topo_host_ring(const struct zn_peer_info *peers, int n, int me, int *ring,
                               int *nhosts, int *nlocal, int *pos)
{
    int *host = calloc((size_t)n, sizeof(int));
    int *start = calloc((size_t)n + 1, sizeof(int));
    int nh = 0, mine = 0;
    ncclResult_t res = ncclSuccess;
    if (!host || !start) {
        res = zn_error(ncclSystemError, ZN_INIT, "out of memory");
        goto out;
    }
    ZN_CHECK_GOTO(zn_topo_hosts(peers, n, host, &nh), res, out);
    /* Counting sort by host, stable in rank order. */
    for (int r = 0; r < n; r++) start[host[r] + 1]++;
    for (int h = 0; h < nh; h++) start[h + 1] += start[h];
    *nlocal = start[host[me] + 1] - start[host[me]];
    for (int r = 0; r < n; r++) {
        int p = start[host[r]]++;
        ring[p] = r;
        if (r == me) mine = p;
    }
    *nhosts = nh;
    *pos = mine;
out:
    free(host);
    free(start);
    return res;
}

int zn_topo_local_index(const struct zn_peer_info *peers, int me)
{
    int idx = 0;
    for (int r = 0; r < me; r++) idx += peers[r].host_hash == peers[me].host_hash;
    return idx;
}

uint64_t zn_topo_remote_ranks(const struct zn_peer_info *peers, int n, int me)
{
    uint64_t remote = 0;
    for (int r = 0; r < n && r < 64; r++)
        if (peers[r].host_hash != peers[me].host_hash) remote |= 1ull << r;
    return remote;
}
