/*
 * Which net device (NIC) a GPU's traffic between hosts uses, and whether the net moves the
 * GPU's memory directly (GPUDirect RDMA), from PCI distances (topo/pci.h). The proxy's GPU net
 * engine asks at setup; each rank decides for itself (a net moves bytes between any two
 * registered buffers, so peers need not agree).
 */
#ifndef ZN_TOPO_NIC_H
#define ZN_TOPO_NIC_H

#include "pci.h"

#include <stddef.h>

/* The sysfs path and NUMA node of GPU cuda_dev (path "" and numa -1 for no GPU, -1, or one not
 * found in sysfs: every device is then as far from it). */
void zn_topo_gpu_pci(int cuda_dev, char *path, size_t len, int *numa);

/* How far the net device at nic_path (NULL: unknown) is from the GPU at gpu_path. */
enum zn_pci_dist zn_topo_nic_dist(const char *gpu_path, int gpu_numa, const char *nic_path);

/* Of n net devices at distances dist[d] from the GPU, the one to use: the nearest; devices
 * equally near are shared out over the ranks of a host in turn (local_index: the rank's place
 * on its host, zn_topo_local_index), so that GPUs without a device of their own do not all
 * crowd onto the first. Only the first 64 devices are considered. */
int zn_topo_nic_pick(const enum zn_pci_dist *dist, int n, int local_index);

/* The GPUDirect RDMA choice of one rank and why, for logs. */
struct zn_topo_gdr {
    int rx; /* received bytes land in GPU memory */
    int tx; /* sent bytes are read from GPU memory */
    char why[320];
};

/* GPUDirect RDMA where there is a GPU (have_gpu), the net device moves GPU memory (ptr_support
 * has NCCL_PTR_CUDA) and is no farther from the GPU than level (ZINC_NET_GDR_LEVEL, NCCL's
 * NCCL_NET_GDR_LEVEL: a path type's name or number; LOC means never; anything else is warned
 * about and taken as PXB): receives then, and sends too with gdr_read (ZINC_NET_GDR_READ). */
void zn_topo_gdr_choose(int have_gpu, int ptr_support, enum zn_pci_dist dist, const char *level,
                        int gdr_read, struct zn_topo_gdr *out);

#endif
