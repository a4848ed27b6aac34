/*
 * NIC and GPUDirect RDMA choice (see nic.h).
 */
#include "nic.h"
#include "net/nccl_net.h"
#include "util/cuda.h"
#include "util/log.h"

#include <stdio.h>

void zn_topo_gpu_pci(int cuda_dev, char *path, size_t len, int *numa)
{
    char id[32];
    *path = 0;
    *numa = -1;
    if (cuda_dev >= 0 && zn_cuda_bus_id(cuda_dev, id, sizeof(id)) == ncclSuccess)
        zn_pci_sysfs_path(id, path, len, numa);
}

enum zn_pci_dist zn_topo_nic_dist(const char *gpu_path, int gpu_numa, const char *nic_path)
{
    int numa = nic_path ? zn_pci_numa_node(nic_path) : -1;
    return zn_pci_distance(gpu_path, gpu_numa, nic_path, numa);
}

int zn_topo_nic_pick(const enum zn_pci_dist *dist, int n, int local_index)
{
    int best = ZN_PCI_SYS + 1, ntied = 0, tied[64];
    for (int d = 0; d < n && d < 64; d++) {
        if ((int)dist[d] < best) best = (int)dist[d], ntied = 0;
        if ((int)dist[d] == best) tied[ntied++] = d;
    }
    return ntied ? tied[local_index % ntied] : 0;
}

void zn_topo_gdr_choose(int have_gpu, int ptr_support, enum zn_pci_dist dist, const char *level,
                        int gdr_read, struct zn_topo_gdr *out)
{
    int lv = zn_pci_parse_level(level);
    if (lv < 0) {
        zn_warn(ZN_NET | ZN_ENV,
                "ZINC_NET_GDR_LEVEL=%s is not LOC, PIX, PXB, PHB, SYS or 0-4; "
                "using PXB",
                level);
        lv = ZN_PCI_PXB;
    }
    const char *lname = zn_pci_dist_name((enum zn_pci_dist)lv);
    out->rx = out->tx = 0;
    if (!have_gpu)
        snprintf(out->why, sizeof(out->why), "no GPUDirect RDMA (no GPU)");
    else if (!(ptr_support & NCCL_PTR_CUDA))
        snprintf(out->why, sizeof(out->why),
                 "no GPUDirect RDMA (the net cannot move GPU memory: ptrSupport %#x)",
                 (unsigned)ptr_support);
    else if (lv == ZN_PCI_LOC || (int)dist > lv)
        snprintf(out->why, sizeof(out->why),
                 "no GPUDirect RDMA (the device is %s from the GPU, ZINC_NET_GDR_LEVEL=%s)",
                 zn_pci_dist_name(dist), lname);
    else {
        out->rx = 1;
        out->tx = gdr_read != 0;
        snprintf(out->why, sizeof(out->why),
                 "GPUDirect RDMA: receives into GPU memory, %s (the device is %s from the GPU, "
                 "ZINC_NET_GDR_LEVEL=%s)",
                 out->tx ? "sends from GPU memory" : "sends from host memory (ZINC_NET_GDR_READ=0)",
                 zn_pci_dist_name(dist), lname);
    }
}
