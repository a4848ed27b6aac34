/* Unit tests of the topology layer (src/topo): hosts and ring order, the GPU reach matrix and
 * rings, NIC and GPUDirect RDMA choice, PCI distances. Made-up machines: no GPU or NIC needed. */
#include "topo/hosts.h"
#include "topo/nic.h"
#include "topo/pci.h"
#include "topo/reach.h"
#include "transport/gpu_peer.h"
#include "net/nccl_net.h"
#include "zt.h"

#include <dirent.h>
#include <stdio.h>
#include <string.h>

/* Peer info of n ranks on the hosts host[r] (a hash per host), GPU bus id gpu[r] ("gpu<g>"). */
static void make_peers(struct zn_peer_info *p, int n, const int *host, const int *gpu)
{
    memset(p, 0, (size_t)n * sizeof(*p));
    for (int r = 0; r < n; r++) {
        p[r].rank = r;
        p[r].host_hash = 0x1000u + (uint64_t)host[r] * 0x9e3779b97f4a7c15ull;
        p[r].cuda_dev = gpu ? gpu[r] : -1;
        if (gpu) snprintf(p[r].bus_id, sizeof(p[r].bus_id), "0000:%02x:00.0", 0x10 + gpu[r]);
    }
}

/* reach matrix of n GPUs from a list of links "a-b" (both ways) plus the diagonal. */
static void links(uint8_t *reach, int n, const int (*ab)[2], int nlinks)
{
    memset(reach, 0, (size_t)n * (size_t)n);
    for (int i = 0; i < n; i++) reach[i * n + i] = 1;
    for (int k = 0; k < nlinks; k++) {
        reach[ab[k][0] * n + ab[k][1]] = 1;
        reach[ab[k][1] * n + ab[k][0]] = 1;
    }
}

/* order is a cycle through all n ranks, each once, whose neighbours reach each other. */
static int valid_ring(const uint8_t *reach, int n, const int *order)
{
    int seen = 0;
    for (int p = 0; p < n; p++) {
        int a = order[p], b = order[(p + 1) % n];
        if (a < 0 || a >= n || (seen >> a) & 1) return 0;
        seen |= 1 << a;
        if (!reach[a * n + b] || !reach[b * n + a]) return 0;
    }
    return seen == (1 << n) - 1;
}

ZT_TEST(ring_full)
{
    uint8_t reach[64];
    int order[8];
    for (int n = 1; n <= 8; n++) {
        memset(reach, 1, sizeof(reach));
        ZT_ASSERT(zn_topo_gpu_ring(reach, n, order));
        for (int p = 0; p < n; p++) ZT_EQ_INT(order[p], p); /* rank order when it works */
    }
}

ZT_TEST(ring_reordered)
{
    /* 4 GPUs linked 0-1, 1-3, 3-2, 2-0 (no 0-3, no 1-2): the ring is 0 1 3 2. */
    static const int ab[][2] = { { 0, 1 }, { 1, 3 }, { 3, 2 }, { 2, 0 } };
    uint8_t reach[16];
    int order[4];
    links(reach, 4, ab, 4);
    ZT_ASSERT(zn_topo_gpu_ring(reach, 4, order));
    ZT_ASSERT(valid_ring(reach, 4, order));
    ZT_EQ_INT(order[0], 0);
    ZT_EQ_INT(order[1], 1);
    ZT_EQ_INT(order[2], 3);
    ZT_EQ_INT(order[3], 2);
}

ZT_TEST(ring_two_islands_of_nvlink)
{
    /* 8 GPUs as two fully connected quads joined by two links (3-4 and 7-0). */
    uint8_t reach[64];
    int ab[32][2], nl = 0, order[8];
    for (int q = 0; q < 2; q++)
        for (int a = 0; a < 4; a++)
            for (int b = a + 1; b < 4; b++) {
                ab[nl][0] = 4 * q + a;
                ab[nl][1] = 4 * q + b;
                nl++;
            }
    ab[nl][0] = 3, ab[nl][1] = 4, nl++;
    ab[nl][0] = 7, ab[nl][1] = 0, nl++;
    links(reach, 8, (const int(*)[2])ab, nl);
    ZT_ASSERT(zn_topo_gpu_ring(reach, 8, order));
    ZT_ASSERT(valid_ring(reach, 8, order));
}

ZT_TEST(ring_none)
{
    uint8_t reach[64];
    int order[8];
    /* A star (everyone reaches 0 only) has no ring for n > 2; a missing link splits 2 GPUs. */
    static const int star[][2] = { { 0, 1 }, { 0, 2 }, { 0, 3 } };
    links(reach, 4, star, 3);
    ZT_ASSERT(!zn_topo_gpu_ring(reach, 4, order));
    links(reach, 2, NULL, 0);
    ZT_ASSERT(!zn_topo_gpu_ring(reach, 2, order));
    /* One direction only does not count. */
    links(reach, 3, NULL, 0);
    reach[0 * 3 + 1] = reach[1 * 3 + 2] = reach[2 * 3 + 0] = 1;
    ZT_ASSERT(!zn_topo_gpu_ring(reach, 3, order));
    /* Two GPUs that reach each other form a ring; more than 8 GPUs are refused. */
    links(reach, 2, (const int[][2]){ { 0, 1 } }, 1);
    ZT_ASSERT(zn_topo_gpu_ring(reach, 2, order));
    ZT_ASSERT(valid_ring(reach, 2, order));
    ZT_ASSERT(!zn_topo_gpu_ring(reach, 9, order));
    /* One rank with the transport off (zn_topo_gpu_reach zeroes even the diagonal): no ring. */
    reach[0] = 0;
    ZT_ASSERT(!zn_topo_gpu_ring(reach, 1, order));
}

ZT_TEST(hosts_and_ring_order)
{
    /* 7 ranks on 3 hosts, interleaved: hosts are numbered by first appearance, the ring keeps
     * each host's ranks together in rank order. */
    static const int host[7] = { 5, 2, 5, 9, 2, 5, 9 };
    struct zn_peer_info p[7];
    make_peers(p, 7, host, NULL);
    int idx[7], nhosts = 0;
    ZT_OK(zn_topo_hosts(p, 7, idx, &nhosts));
    ZT_EQ_INT(nhosts, 3);
    static const int want_idx[7] = { 0, 1, 0, 2, 1, 0, 2 };
    for (int r = 0; r < 7; r++) ZT_EQ_INT(idx[r], want_idx[r]);
    static const int want_ring[7] = { 0, 2, 5, 1, 4, 3, 6 };
    for (int me = 0; me < 7; me++) {
        int ring[7], nh = 0, nlocal = 0, pos = -1;
        ZT_OK(zn_topo_host_ring(p, 7, me, ring, &nh, &nlocal, &pos));
        ZT_EQ_INT(nh, 3);
        for (int i = 0; i < 7; i++) ZT_EQ_INT(ring[i], want_ring[i]);
        ZT_EQ_INT(ring[pos], me);
        ZT_EQ_INT(nlocal, host[me] == 5 ? 3 : 2);
    }
    /* A rank's place on its host, and the ranks on other hosts. */
    ZT_EQ_INT(zn_topo_local_index(p, 0), 0);
    ZT_EQ_INT(zn_topo_local_index(p, 5), 2);
    ZT_EQ_INT(zn_topo_local_index(p, 4), 1);
    ZT_EQ_INT(zn_topo_local_index(p, 6), 1);
    ZT_ASSERT(zn_topo_remote_ranks(p, 7, 0) == ((1u << 1) | (1u << 3) | (1u << 4) | (1u << 6)));
    ZT_ASSERT(zn_topo_remote_ranks(p, 7, 3) == 0x37); /* all but 3 and 6 */
    /* One host: a ring in rank order. */
    static const int one[4] = { 1, 1, 1, 1 };
    make_peers(p, 4, one, NULL);
    int ring[4], nh = 0, nlocal = 0, pos = -1;
    ZT_OK(zn_topo_host_ring(p, 4, 2, ring, &nh, &nlocal, &pos));
    ZT_EQ_INT(nh, 1);
    ZT_EQ_INT(nlocal, 4);
    ZT_EQ_INT(pos, 2);
    for (int i = 0; i < 4; i++) ZT_EQ_INT(ring[i], i);
    ZT_ASSERT(zn_topo_remote_ranks(p, 4, 0) == 0);
}

/* A made-up machine for the reach probe: GPUs "0000:1X:00.0" are ordinals X (X < 4 visible),
 * NVLink between 0-1 and 2-3 only, and GPU 1 cannot reach 3 (none of the other pairs). */
static int fake_dev(const char *bus_id)
{
    unsigned bus = 0;
    if (sscanf(bus_id, "0000:%x:00.0", &bus) != 1 || bus < 0x10 || bus >= 0x14) return -1;
    return (int)bus - 0x10;
}
static int fake_calls, fake_self_calls;
static int fake_access(int a, int b)
{
    fake_calls++;
    fake_self_calls += a == b; /* the same GPU reaches itself without asking */
    return (a / 2) == (b / 2);
}
static const struct zn_topo_gpu_probe fake_probe = { .device_by_bus_id = fake_dev,
                                                     .can_access_peer = fake_access };

ZT_TEST(gpu_reach)
{
    char why[160];
    uint8_t reach[64];
    struct zn_peer_info p[8];
    /* One host, 4 ranks on GPUs 0 1 2 3: two NVLink pairs. */
    static const int h1[4] = { 0, 0, 0, 0 }, g4[4] = { 0, 1, 2, 3 };
    make_peers(p, 4, h1, g4);
    *why = 0;
    ZT_EQ_INT(zn_topo_gpu_reach(p, 4, 0, 0, &fake_probe, reach, why, sizeof(why)), 1);
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++) ZT_EQ_INT(reach[a * 4 + b], a / 2 == b / 2);
    ZT_EQ_STR(why, "GPU 0000:10:00.0 cannot access GPU 0000:12:00.0");
    ZT_ASSERT(!zn_topo_reach_full(reach, 4));
    int order[8];
    ZT_ASSERT(!zn_topo_gpu_ring(reach, 4, order));
    /* Two ranks sharing GPU 2 and one on GPU 3: all reach (a GPU reaches itself). */
    static const int g3[3] = { 2, 2, 3 };
    make_peers(p, 3, h1, g3);
    *why = 0;
    ZT_EQ_INT(zn_topo_gpu_reach(p, 3, 1, 0, &fake_probe, reach, why, sizeof(why)), 1);
    ZT_ASSERT(zn_topo_reach_full(reach, 3));
    ZT_EQ_STR(why, "");
    /* A GPU this process does not see (hidden by CUDA_VISIBLE_DEVICES) reaches nothing. */
    static const int ghid[2] = { 0, 7 };
    make_peers(p, 2, h1, ghid);
    *why = 0;
    zn_topo_gpu_reach(p, 2, 0, 0, &fake_probe, reach, why, sizeof(why));
    ZT_EQ_INT(reach[0], 1);
    ZT_EQ_INT(reach[1], 0);
    ZT_EQ_INT(reach[2], 0);
    ZT_EQ_INT(reach[3], 1);
    /* Two hosts: pairs across hosts never reach; the other host's pairs are its ranks' to judge
     * (1 here, even where its ranks would say 0), and this host's are judged. */
    static const int h2[4] = { 0, 0, 1, 1 }, gx[4] = { 0, 2, 1, 3 };
    make_peers(p, 4, h2, gx);
    *why = 0;
    fake_calls = 0;
    ZT_EQ_INT(zn_topo_gpu_reach(p, 4, 0, 0, &fake_probe, reach, why, sizeof(why)), 1);
    ZT_EQ_STR(why, "ranks on more than one host");
    static const uint8_t want2[16] = { 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 1, 0, 0, 1, 1 };
    ZT_ASSERT(memcmp(reach, want2, 16) == 0);
    ZT_EQ_INT(fake_calls, 2); /* 0-2 and 2-0 only */
    /* Rank 2's view of the same communicator, and the agreement of both hosts' views. */
    uint8_t each[4 * 16], all[16];
    memcpy(each, reach, 16);
    memcpy(each + 16, reach, 16);
    *why = 0;
    zn_topo_gpu_reach(p, 4, 2, 0, &fake_probe, each + 32, why, sizeof(why));
    memcpy(each + 48, each + 32, 16);
    static const uint8_t want_all[16] = { 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1 };
    zn_topo_reach_combine(each, 4, all);
    ZT_ASSERT(memcmp(all, want_all, 16) == 0);
    /* Off: ZINC_P2P_DISABLE, or more ranks than the transport maps. */
    *why = 0;
    memset(reach, 7, sizeof(reach));
    ZT_EQ_INT(zn_topo_gpu_reach(p, 4, 0, 1, &fake_probe, reach, why, sizeof(why)), 0);
    ZT_EQ_STR(why, "ZINC_P2P_DISABLE=1");
    for (int i = 0; i < 16; i++) ZT_EQ_INT(reach[i], 0);
    static struct zn_peer_info many[ZN_P2P_MAX_COMM + 1];
    static uint8_t big[(ZN_P2P_MAX_COMM + 1) * (ZN_P2P_MAX_COMM + 1)];
    *why = 0;
    ZT_EQ_INT(
        zn_topo_gpu_reach(many, ZN_P2P_MAX_COMM + 1, 0, 0, &fake_probe, big, why, sizeof(why)), 0);
    ZT_EQ_STR(why, "more than 64 GPUs");
    ZT_EQ_INT(fake_self_calls, 0);
}

ZT_TEST(gpu_rings_across_hosts)
{
    /* 6 ranks, 2 hosts of 3 (hosts interleaved by rank), ring by host 0 2 4 | 1 3 5. */
    static const int host[6] = { 0, 1, 0, 1, 0, 1 };
    struct zn_peer_info p[6];
    make_peers(p, 6, host, NULL);
    int ring[6], nh, nlocal, pos;
    ZT_OK(zn_topo_host_ring(p, 6, 0, ring, &nh, &nlocal, &pos));
    uint8_t reach[36];
    memset(reach, 0, sizeof(reach));
    for (int a = 0; a < 6; a++)
        for (int b = 0; b < 6; b++) reach[a * 6 + b] = host[a] == host[b];
    ZT_ASSERT(zn_topo_ring_hops_reach(p, 6, ring, reach));
    ZT_ASSERT(zn_topo_hosts_reach(p, 6, reach));
    /* 0 and 4 do not reach each other: the chain 0-2-4 still carries the ring, but not every
     * two GPUs of host 0 reach each other. */
    reach[0 * 6 + 4] = reach[4 * 6 + 0] = 0;
    ZT_ASSERT(zn_topo_ring_hops_reach(p, 6, ring, reach));
    ZT_ASSERT(!zn_topo_hosts_reach(p, 6, reach));
    /* 2 reaches 4 one way only: the ring's hop 2 -> 4 fails. */
    reach[4 * 6 + 2] = 0;
    ZT_ASSERT(!zn_topo_ring_hops_reach(p, 6, ring, reach));
    /* The arenas a rank maps: its host's ranks, or on a ring its neighbours among them (its own
     * entry counts only off a ring: zn_p2p_create ignores it). */
    uint8_t want[6];
    zn_topo_gpu_maps(p, 6, 2, 0, 4, 0, want);
    static const uint8_t all_local[6] = { 1, 0, 1, 0, 1, 0 };
    ZT_ASSERT(memcmp(want, all_local, 6) == 0);
    zn_topo_gpu_maps(p, 6, 0, 1, 2, 5, want); /* prev 5 is on the other host: not mapped */
    static const uint8_t ring_local[6] = { 0, 0, 1, 0, 0, 0 };
    ZT_ASSERT(memcmp(want, ring_local, 6) == 0);
}

ZT_TEST(nic_choice)
{
    /* Nearest wins; equally near devices go to a host's ranks in turn. */
    static const enum zn_pci_dist d1[4] = { ZN_PCI_SYS, ZN_PCI_PIX, ZN_PCI_PHB, ZN_PCI_PIX };
    ZT_EQ_INT(zn_topo_nic_pick(d1, 4, 0), 1);
    ZT_EQ_INT(zn_topo_nic_pick(d1, 4, 1), 3);
    ZT_EQ_INT(zn_topo_nic_pick(d1, 4, 2), 1);
    static const enum zn_pci_dist d2[3] = { ZN_PCI_SYS, ZN_PCI_SYS, ZN_PCI_SYS };
    for (int i = 0; i < 6; i++) ZT_EQ_INT(zn_topo_nic_pick(d2, 3, i), i % 3);
    ZT_EQ_INT(zn_topo_nic_pick(d2, 1, 5), 0);
    /* Distances from made-up sysfs paths: the NIC's NUMA node is unknown (no such device
     * here), so only a NIC under the GPU's host bridge is near. */
    const char *gpu = "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:08.0/0000:05:00.0";
    ZT_EQ_INT(zn_topo_nic_dist(gpu, 0,
                               "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:10.0/"
                               "0000:06:00.0"),
              ZN_PCI_PIX);
    ZT_EQ_INT(zn_topo_nic_dist(gpu, 0, "/sys/devices/pci0000:80/0000:80:01.0/0000:81:00.0"),
              ZN_PCI_SYS);
    ZT_EQ_INT(zn_topo_nic_dist(gpu, 0, NULL), ZN_PCI_SYS);
    ZT_EQ_INT(zn_topo_nic_dist("", -1, "/sys/devices/pci0000:00/0000:00:01.0"), ZN_PCI_SYS);
    /* No GPU: no path. */
    char path[256] = "x";
    int numa = 3;
    zn_topo_gpu_pci(-1, path, sizeof(path), &numa);
    ZT_EQ_STR(path, "");
    ZT_EQ_INT(numa, -1);
}

ZT_TEST(gdr_choice)
{
    struct zn_topo_gdr g;
    int both = NCCL_PTR_HOST | NCCL_PTR_CUDA;
    zn_topo_gdr_choose(1, both, ZN_PCI_PIX, "PXB", 1, &g);
    ZT_ASSERT(g.rx && g.tx);
    ZT_ASSERT(strstr(g.why, "sends from GPU memory (the device is PIX from the GPU, "
                            "ZINC_NET_GDR_LEVEL=PXB)") != NULL);
    zn_topo_gdr_choose(1, both, ZN_PCI_PXB, "pxb", 0, &g);
    ZT_ASSERT(g.rx && !g.tx);
    ZT_ASSERT(strstr(g.why, "ZINC_NET_GDR_READ=0") != NULL);
    zn_topo_gdr_choose(1, both, ZN_PCI_PHB, "PXB", 1, &g);
    ZT_ASSERT(!g.rx && !g.tx);
    ZT_EQ_STR(g.why, "no GPUDirect RDMA (the device is PHB from the GPU, ZINC_NET_GDR_LEVEL=PXB)");
    zn_topo_gdr_choose(1, both, ZN_PCI_SYS, "4", 1, &g); /* legacy number: SYS */
    ZT_ASSERT(g.rx && g.tx);
    zn_topo_gdr_choose(1, both, ZN_PCI_LOC, "LOC", 1, &g); /* LOC: never */
    ZT_ASSERT(!g.rx && !g.tx);
    zn_topo_gdr_choose(1, both, ZN_PCI_PXB, "nonsense", 1, &g); /* warned, PXB */
    ZT_ASSERT(g.rx && g.tx);
    zn_topo_gdr_choose(1, both, ZN_PCI_PHB, "nonsense", 1, &g);
    ZT_ASSERT(!g.rx && strstr(g.why, "ZINC_NET_GDR_LEVEL=PXB") != NULL);
    zn_topo_gdr_choose(1, NCCL_PTR_HOST, ZN_PCI_PIX, "SYS", 1, &g);
    ZT_ASSERT(!g.rx && !g.tx);
    ZT_EQ_STR(g.why, "no GPUDirect RDMA (the net cannot move GPU memory: ptrSupport 0x1)");
    zn_topo_gdr_choose(0, both, ZN_PCI_PIX, "SYS", 1, &g);
    ZT_ASSERT(!g.rx && !g.tx);
    ZT_EQ_STR(g.why, "no GPUDirect RDMA (no GPU)");
}

/* PCI distances from sysfs paths (made-up machines: a switch with a GPU and a NIC on two of its
 * downstream ports, a second switch tier, other root ports and host bridges). */
ZT_TEST(pci_distance)
{
    const char *gpu = "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:08.0/0000:05:00.0";
    const char *nic_same_switch =
        "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:10.0/0000:06:00.0";
    const char *nic_two_tiers = "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:10.0/"
                                "0000:06:00.0/0000:07:04.0/0000:08:00.0";
    const char *nic_other_root_port = "/sys/devices/pci0000:00/0000:00:03.0/0000:09:00.0";
    const char *nic_other_bridge = "/sys/devices/pci0000:80/0000:80:01.0/0000:81:00.0";
    ZT_EQ_INT(zn_pci_distance(gpu, 0, gpu, 0), ZN_PCI_LOC);
    ZT_EQ_INT(zn_pci_distance(gpu, 0, nic_same_switch, 0), ZN_PCI_PIX);
    ZT_EQ_INT(zn_pci_distance(nic_same_switch, 0, gpu, 0), ZN_PCI_PIX);
    ZT_EQ_INT(zn_pci_distance(gpu, 0, nic_two_tiers, 0), ZN_PCI_PXB);
    ZT_EQ_INT(zn_pci_distance(gpu, 0, nic_other_root_port, 0), ZN_PCI_PHB);
    ZT_EQ_INT(zn_pci_distance(gpu, 0, nic_other_bridge, 0), ZN_PCI_PHB);   /* one NUMA node */
    ZT_EQ_INT(zn_pci_distance(gpu, 0, nic_other_bridge, 1), ZN_PCI_SYS);   /* two */
    ZT_EQ_INT(zn_pci_distance(gpu, -1, nic_other_bridge, -1), ZN_PCI_SYS); /* unknown */
    /* Functions of one device under one root port; a class directory after the device. */
    ZT_EQ_INT(zn_pci_distance("/sys/devices/pci0000:00/0000:00:02.0/0000:03:00.0", 0,
                              "/sys/devices/pci0000:00/0000:00:02.0/0000:03:00.1/net/eth0", 0),
              ZN_PCI_PIX);
    /* Unknown or not a PCI device: nothing is near. */
    ZT_EQ_INT(zn_pci_distance(NULL, 0, gpu, 0), ZN_PCI_SYS);
    ZT_EQ_INT(zn_pci_distance("", 0, gpu, 0), ZN_PCI_SYS);
    ZT_EQ_INT(zn_pci_distance("/sys/devices/virtual/net/lo", 0, gpu, 0), ZN_PCI_SYS);
    ZT_EQ_INT(zn_pci_distance("/sys/devices/pci0000:00", 0, gpu, 0), ZN_PCI_SYS);
    /* Levels as NCCL writes them. */
    ZT_EQ_INT(zn_pci_parse_level("PXB"), ZN_PCI_PXB);
    ZT_EQ_INT(zn_pci_parse_level("phb"), ZN_PCI_PHB);
    ZT_EQ_INT(zn_pci_parse_level("0"), ZN_PCI_LOC);
    ZT_EQ_INT(zn_pci_parse_level("4"), ZN_PCI_SYS);
    ZT_EQ_INT(zn_pci_parse_level("5"), ZN_PCI_SYS);
    ZT_EQ_INT(zn_pci_parse_level("NVL"), -1);
    ZT_EQ_INT(zn_pci_parse_level("-1"), -1);
    ZT_EQ_INT(zn_pci_parse_level(""), -1);
    ZT_EQ_STR(zn_pci_dist_name(ZN_PCI_PIX), "PIX");
    /* A bus id that is not in sysfs has no path. */
    char path[256];
    int numa = 7;
    ZT_EQ_INT(zn_pci_sysfs_path("ffff:ff:1f.7", path, sizeof(path), &numa), -1);
    ZT_EQ_INT(numa, -1);
    ZT_EQ_STR(path, "");
    ZT_EQ_INT(zn_pci_sysfs_path("not a bus id", path, sizeof(path), &numa), -1);
    /* A real device of this machine, named as CUDA writes bus ids (8-digit domain, upper case). */
    DIR *d = opendir("/sys/bus/pci/devices");
    struct dirent *e = NULL;
    while (d && (e = readdir(d)) != NULL && e->d_name[0] == '.') {
    }
    if (e) {
        unsigned dom, bus, dev, fn;
        ZT_EQ_INT(sscanf(e->d_name, "%x:%x:%x.%x", &dom, &bus, &dev, &fn), 4);
        char id[32];
        snprintf(id, sizeof(id), "%08X:%02X:%02X.%X", dom, bus, dev, fn);
        ZT_EQ_INT(zn_pci_sysfs_path(id, path, sizeof(path), &numa), 0);
        ZT_ASSERT(strstr(path, e->d_name) != NULL);
        ZT_EQ_INT(zn_pci_distance(path, numa, path, numa), ZN_PCI_LOC);
    }
    if (d) closedir(d);
}

ZT_MAIN(ZT_CASE(ring_full), ZT_CASE(ring_reordered), ZT_CASE(ring_two_islands_of_nvlink),
        ZT_CASE(ring_none), ZT_CASE(hosts_and_ring_order), ZT_CASE(gpu_reach),
        ZT_CASE(gpu_rings_across_hosts), ZT_CASE(nic_choice), ZT_CASE(gdr_choice),
        ZT_CASE(pci_distance))
