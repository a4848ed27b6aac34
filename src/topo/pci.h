/*
 * PCI topology between a GPU and a NIC: how far apart two devices sit, in NCCL's path types,
 * from their sysfs paths. topo/nic.h picks the NIC nearest a GPU by them and decides whether a
 * net may move a GPU's memory directly (GPUDirect RDMA, ZINC_NET_GDR_LEVEL).
 *
 * A device's sysfs path lists the bridges above it, from the host bridge down:
 *
 *   /sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:08.0/0000:05:00.0
 *                host bridge  root port  switch up    switch down  the device
 *
 * Two devices under one switch (paths that part below a common bridge, at most one switch
 * between them) are PIX; under a tree of switches below one root port, PXB; below different
 * root ports of one host bridge, PHB; under different host bridges, PHB on one NUMA node and
 * SYS across nodes (or when the node is not known). An unknown path is SYS: nothing is assumed
 * to be near.
 */
#ifndef ZN_TOPO_PCI_H
#define ZN_TOPO_PCI_H

#include <stddef.h>

enum zn_pci_dist {
    ZN_PCI_LOC = 0, /* the same device */
    ZN_PCI_PIX = 1, /* through at most one PCIe switch */
    ZN_PCI_PXB = 2, /* through several switches, not the host bridge */
    ZN_PCI_PHB = 3, /* through a host bridge (the CPU), one NUMA node */
    ZN_PCI_SYS = 4  /* across NUMA nodes, or unknown */
};

/* Distance between the devices at sysfs paths a and b (NULL or empty: unknown, SYS). numa_a and
 * numa_b are their NUMA nodes (-1: unknown), consulted only when the host bridges differ. */
enum zn_pci_dist zn_pci_distance(const char *a, int numa_a, const char *b, int numa_b);

/* "LOC", "PIX", "PXB", "PHB", "SYS". */
const char *zn_pci_dist_name(enum zn_pci_dist d);

/* A level as NCCL's *_LEVEL variables write it: a path type's name (any case) or its legacy
 * number (0 LOC .. 4 SYS; larger numbers are SYS). Returns -1 for anything else. */
int zn_pci_parse_level(const char *s);

/* The sysfs path of the PCI device with this bus id ("0000:1b:00.0", any case; a bus id with a
 * shorter domain as CUDA writes it is padded), and its NUMA node (-1 if unknown). Returns 0, or
 * -1 if the device is not in sysfs (path left empty). */
int zn_pci_sysfs_path(const char *bus_id, char *path, size_t len, int *numa);

/* The NUMA node of the device at a sysfs path, or -1. */
int zn_pci_numa_node(const char *path);

#endif
