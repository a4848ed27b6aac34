/*
 * CUDA, reached through the statically linked runtime and, for the driver's virtual memory
 * API, through driver entry points the runtime looks up -- so the library loads on a machine
 * without a GPU driver and simply finds no devices there. Every function here exists in a
 * build without CUDA too, and then reports that CUDA is absent.
 */
#ifndef ZN_UTIL_CUDA_H
#define ZN_UTIL_CUDA_H

#include "nccl.h"

#include <stddef.h>
#include <stdint.h>

/* 1 if this build has CUDA and the machine has a usable device and driver. */
int zn_cuda_available(void);
/* The calling thread's current device (the application's cudaSetDevice), or -1. */
int zn_cuda_current_device(void);
ncclResult_t zn_cuda_set_device(int dev);
/* Make dev the calling thread's device for a stretch of work, whatever cudaGetDevice says:
 * returns the device to go back to with zn_cuda_leave (-1: none, or dev could not be set). A
 * thread that has made no runtime call yet (a helper thread of zinc's, an application's new
 * thread) has device 0 by cudaGetDevice but no context bound, and the driver's calls
 * (cuMemGetAddressRange, cuMemExportToShareableHandle, ...) fail there with "invalid device
 * context": only cudaSetDevice binds the device's primary context, so it is always called. */
int zn_cuda_enter(int dev);
void zn_cuda_leave(int dev, int prev);
/* "0000:1b:00.0"-style PCI bus id of dev (buf of at least 20 bytes). */
ncclResult_t zn_cuda_bus_id(int dev, char *buf, size_t len);
/* The local ordinal of the device with that bus id, or -1 if it is not visible here. */
int zn_cuda_device_by_bus_id(const char *bus_id);
/* Whether dev can map memory of peer (same process: peer access; across processes the same). */
int zn_cuda_can_access_peer(int dev, int peer);
ncclResult_t zn_cuda_enable_peer_access(int dev, int peer);
/* Whether dev supports cuMem allocations exportable as POSIX file descriptors. */
int zn_cuda_cumem_fd_supported(int dev);
int zn_cuda_sm_count(int dev);

/* Device memory. */
ncclResult_t zn_cuda_malloc(void **ptr, size_t size, const char *what);
void zn_cuda_free(void *ptr);
ncclResult_t zn_cuda_memset(void *ptr, int v, size_t size);
ncclResult_t zn_cuda_memcpy_htod(void *dst, const void *src, size_t size);
/* A copy in any direction that is complete when it returns (a stream of its own: it waits for
 * nothing of the user's). Setup and teardown only. */
ncclResult_t zn_cuda_memcpy_sync(void *dst, const void *src, size_t size);
/* The current device's free and total memory (cudaMemGetInfo); -1 where unknown. */
int zn_cuda_mem_info(size_t *free_bytes, size_t *total_bytes);
/* Pinned host memory mapped into the device address space (flags, error words). */
ncclResult_t zn_cuda_host_alloc(void **host, void **dev, size_t size);
void zn_cuda_host_free(void *host);

/* Exportable device memory (cuMem, POSIX fd handles). The allocation is mapped read-write
 * for dev; size is rounded up to the granularity. */
struct zn_cumem {
    void *ptr;
    size_t size;
    uint64_t handle; /* CUmemGenericAllocationHandle */
    int dev;
    int imported;
    int released; /* zn_cumem_release: the address range is reserved, no memory is mapped */
};
ncclResult_t zn_cumem_alloc(int dev, size_t size, struct zn_cumem *out);
/* Grant read-write access to m to every other GPU of this process that can reach its device
 * peer to peer, as ncclMemAlloc's memory has: a program may then copy or launch on it with
 * any of its GPUs current, as it may with cudaMalloc's. */
ncclResult_t zn_cumem_share_local(const struct zn_cumem *m);
/* A new file descriptor for the allocation (the caller closes it). */
ncclResult_t zn_cumem_export_fd(const struct zn_cumem *m, int *fd);
/* Map a peer's allocation (its fd) into this process, readable and writable by dev. */
ncclResult_t zn_cumem_import_fd(int fd, size_t size, int dev, struct zn_cumem *out);
void zn_cumem_free(struct zn_cumem *m);
/* Suspension (ncclCommSuspend): zn_cumem_release unmaps the memory and drops this process's
 * handle on it, but keeps the address range reserved, so that every pointer into it (kernel
 * arguments, captured graphs) is valid again once memory is mapped there anew: by
 * zn_cumem_recreate (an allocation of our own: new memory of the same size, its content
 * undefined) or zn_cumem_reimport_fd (a peer's, from its fd). The physical memory returns to the
 * driver once no process maps it and no handle or fd of it is open. zn_cumem_free frees a
 * released allocation too. */
ncclResult_t zn_cumem_release(struct zn_cumem *m);
ncclResult_t zn_cumem_recreate(struct zn_cumem *m);
ncclResult_t zn_cumem_reimport_fd(int fd, struct zn_cumem *m);
/* The cuMem allocation behind ptr (ncclMemFree). Returns 0 and *m, or -1 if ptr is not the
 * start of a cuMem allocation. */
int zn_cumem_lookup(void *ptr, struct zn_cumem *m);
/* The cuMem allocation that contains ptr (anywhere inside it): its start, size and handle in *m
 * (not owned: the allocation keeps its reference). Returns -1 for other memory. */
int zn_cumem_find(const void *ptr, struct zn_cumem *m);

/* The device allocation (cudaMalloc or cuMem) that contains ptr: its start and size. Returns
 * -1 for memory that is not device memory of this process. */
int zn_cuda_mem_range(const void *ptr, void **base, size_t *size);
/* The size of that allocation (zn_cuda_mem_range); 0 for NULL and for other memory. */
size_t zn_cuda_alloc_bytes(const void *ptr);
/* The ordinal of the GPU whose memory ptr is, whatever device is current; -1 for memory that is
 * not device memory. */
int zn_cuda_pointer_device(const void *ptr);
/* A dmabuf fd for [ptr, ptr + size) of device memory (page-aligned), for a NIC to register
 * (cuMemGetHandleForAddressRange). Returns 0, or -1 where the driver or GPU cannot. */
int zn_cuda_dmabuf_fd(void *ptr, size_t size, int *fd);

/* Legacy CUDA IPC (the fallback where cuMem fds are not available). 64-byte handles. */
ncclResult_t zn_cuda_ipc_get(void *ptr, void *handle64);
ncclResult_t zn_cuda_ipc_open(const void *handle64, void **ptr);
void zn_cuda_ipc_close(void *ptr);

/* Host-driven copies (the p2p transport's one-sided puts): a non-blocking stream of this
 * process's current device, copies of any direction ordered on it, and a wait for them. A
 * source in pageable host memory may be reused as soon as the copy call returns. */
ncclResult_t zn_cuda_stream_create(void **stream);
void zn_cuda_stream_destroy(void *stream);
ncclResult_t zn_cuda_memcpy_async(void *dst, const void *src, size_t size, void *stream);
/* Device to device (a peer's memory included), through the driver where it gives the entry
 * point: the runtime's cudaMemcpyAsync looks both pointers up first (the proxy's put + signal
 * round trip on 2 H100: 13.3 us against 14.1 - 15.8 through the runtime). */
ncclResult_t zn_cuda_memcpy_dtod_async(void *dst, const void *src, size_t size, void *stream);
/* Store value at dst (device memory, also a peer's mapped here) once the stream's earlier work
 * is done and visible (cuStreamWriteValue64): no copy engine, no host buffer. -1 if the driver
 * cannot (no stream memory operations, or not for that address); nothing was queued then. */
int zn_cuda_write_value64(void *stream, void *dst, uint64_t value);
ncclResult_t zn_cuda_stream_sync(void *stream);

/* Streams and host synchronisation (setup and teardown only, never on the data path). */
ncclResult_t zn_cuda_device_sync(void);
/* Whether the stream is being captured into a graph. */
int zn_cuda_stream_capturing(cudaStream_t s);

/* What this machine offers (zinc-info): device and driver queries only, no memory or kernels. */
enum zn_cuda_state {
    ZN_CUDA_OK,         /* at least one device */
    ZN_CUDA_NOT_BUILT,  /* this build has no CUDA */
    ZN_CUDA_NO_DRIVER,  /* no NVIDIA driver loaded */
    ZN_CUDA_OLD_DRIVER, /* the driver is older than the runtime this build links */
    ZN_CUDA_NO_DEVICE,  /* a driver, but no device visible to this process */
    ZN_CUDA_ERROR,      /* anything else: see error */
};
struct zn_cuda_system {
    enum zn_cuda_state state;
    int driver_version; /* CUDA version the driver supports (12040 = 12.4), 0 if none */
    int runtime_version;
    int ndev;
    char error[128]; /* the runtime's message when state is ZN_CUDA_ERROR */
};
struct zn_cuda_gpu {
    char name[256];
    char bus_id[20];
    size_t mem_bytes;
    int cc_major, cc_minor;
    int sm_count;
    int cumem_fd;   /* cuMem allocations exportable as POSIX file descriptors */
    int legacy_ipc; /* cudaIpc* memory handles (needs unified addressing) */
    int exclusive;  /* compute mode lets only one process (or none) use it */
};
/* How GPU a reaches GPU b's memory. */
struct zn_cuda_link {
    int access;    /* peer access */
    int atomics;   /* native atomics over the link (NVLink has them, PCIe peers do not) */
    int perf_rank; /* the runtime's relative performance rank (lower is faster), -1 unknown */
};
void zn_cuda_query_system(struct zn_cuda_system *s);
ncclResult_t zn_cuda_query_gpu(int dev, struct zn_cuda_gpu *g);
void zn_cuda_query_link(int a, int b, struct zn_cuda_link *l);

/* The error string of the last CUDA error of this thread, for messages. */
const char *zn_cuda_last_error_string(void);

#endif
