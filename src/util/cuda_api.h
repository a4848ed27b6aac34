/*
 * Every CUDA wrapper of zinc in one list (included by util/cuda.h, which declares them, and by
 * util/cuda_none.c, which defines them for builds without CUDA): return type, name, parameters,
 * and what a build without CUDA answers, one of
 *
 *   ZN_NOCUDA_ERR(what)   ncclInvalidUsage, logged as "what: this zinc build has no CUDA support"
 *   ZN_NOCUDA_RET(value)  that value (0, -1, NULL: "no device", "not device memory", ...)
 *   ZN_NOCUDA_VOID        nothing (functions that return nothing)
 *   ZN_NOCUDA_DO(stmts)   these statements (the few whose answer fills a struct)
 *
 * The real functions, for builds with CUDA, are in util/cuda_<concern>.c: devices, memory,
 * cuMem, IPC, streams, queries. A list rather than a declaration here and a stub there for each
 * function: a function added to the list exists in both builds, and a stub cannot drift from
 * its declaration. (An ops table was the alternative; it would have added a dispatching
 * wrapper per function on top of the slot and the stub, or changed every caller.)
 */
/* clang-format off */

/* ---- Devices (cuda_dev.c) -------------------------------------------------------------- */

/* 1 if this build has CUDA and the machine has a usable device and driver. */
ZN_CUDA_FN(int, zn_cuda_available, (void), ZN_NOCUDA_RET(0))
/* The calling thread's current device (the application's cudaSetDevice), or -1. */
ZN_CUDA_FN(int, zn_cuda_current_device, (void), ZN_NOCUDA_RET(-1))
ZN_CUDA_FN(ncclResult_t, zn_cuda_set_device, (int dev), ZN_NOCUDA_ERR("cudaSetDevice"))
/* Make dev the calling thread's device for a stretch of work, whatever cudaGetDevice says:
 * returns the device to go back to with zn_cuda_leave (-1: none, or dev could not be set). A
 * thread that has made no runtime call yet (a helper thread of zinc's, an application's new
 * thread) has device 0 by cudaGetDevice but no context bound, and the driver's calls
 * (cuMemGetAddressRange, cuMemExportToShareableHandle, ...) fail there with "invalid device
 * context": only cudaSetDevice binds the device's primary context, so it is always called. */
ZN_CUDA_FN(int, zn_cuda_enter, (int dev), ZN_NOCUDA_RET(-1))
ZN_CUDA_FN(void, zn_cuda_leave, (int dev, int prev), ZN_NOCUDA_VOID)
/* "0000:1b:00.0"-style PCI bus id of dev (buf of at least 20 bytes). */
ZN_CUDA_FN(ncclResult_t, zn_cuda_bus_id, (int dev, char *buf, size_t len), ZN_NOCUDA_ERR("bus id"))
/* The local ordinal of the device with that bus id, or -1 if it is not visible here. */
ZN_CUDA_FN(int, zn_cuda_device_by_bus_id, (const char *bus_id), ZN_NOCUDA_RET(-1))
/* Whether dev can map memory of peer (same process: peer access; across processes the same).
 * The driver's answer only: which GPUs of a communicator reach each other is topo/'s. */
ZN_CUDA_FN(int, zn_cuda_can_access_peer, (int dev, int peer), ZN_NOCUDA_RET(0))
ZN_CUDA_FN(ncclResult_t, zn_cuda_enable_peer_access, (int dev, int peer),
           ZN_NOCUDA_ERR("peer access"))
/* Whether dev supports cuMem allocations exportable as POSIX file descriptors. */
ZN_CUDA_FN(int, zn_cuda_cumem_fd_supported, (int dev), ZN_NOCUDA_RET(0))
ZN_CUDA_FN(int, zn_cuda_sm_count, (int dev), ZN_NOCUDA_RET(0))
/* Wait for the current device (setup and teardown only, never on the data path). */
ZN_CUDA_FN(ncclResult_t, zn_cuda_device_sync, (void), ZN_NOCUDA_ERR("cudaDeviceSynchronize"))

/* ---- Device and pinned host memory (cuda_mem.c) ---------------------------------------- */

ZN_CUDA_FN(ncclResult_t, zn_cuda_malloc, (void **ptr, size_t size, const char *what),
           ZN_NOCUDA_ERR(what))
ZN_CUDA_FN(void, zn_cuda_free, (void *ptr), ZN_NOCUDA_VOID)
ZN_CUDA_FN(ncclResult_t, zn_cuda_memset, (void *ptr, int v, size_t size),
           ZN_NOCUDA_ERR("cudaMemset"))
ZN_CUDA_FN(ncclResult_t, zn_cuda_memcpy_htod, (void *dst, const void *src, size_t size),
           ZN_NOCUDA_ERR("cudaMemcpy"))
/* A copy in any direction that is complete when it returns (a stream of its own: it waits for
 * nothing of the user's). Setup and teardown only. */
ZN_CUDA_FN(ncclResult_t, zn_cuda_memcpy_sync, (void *dst, const void *src, size_t size),
           ZN_NOCUDA_ERR("cudaMemcpy"))
/* The current device's free and total memory (cudaMemGetInfo); -1 where unknown. */
ZN_CUDA_FN(int, zn_cuda_mem_info, (size_t *free_bytes, size_t *total_bytes), ZN_NOCUDA_RET(-1))
/* Pinned host memory mapped into the device address space (flags, error words). */
ZN_CUDA_FN(ncclResult_t, zn_cuda_host_alloc, (void **host, void **dev, size_t size),
           ZN_NOCUDA_ERR("cudaHostAlloc"))
ZN_CUDA_FN(void, zn_cuda_host_free, (void *host), ZN_NOCUDA_VOID)
/* The device allocation (cudaMalloc or cuMem) that contains ptr: its start and size. Returns
 * -1 for memory that is not device memory of this process. */
ZN_CUDA_FN(int, zn_cuda_mem_range, (const void *ptr, void **base, size_t *size), ZN_NOCUDA_RET(-1))
/* The size of that allocation (zn_cuda_mem_range); 0 for NULL and for other memory. */
ZN_CUDA_FN(size_t, zn_cuda_alloc_bytes, (const void *ptr), ZN_NOCUDA_RET(0))
/* The ordinal of the GPU whose memory ptr is, whatever device is current; -1 for memory that is
 * not device memory. */
ZN_CUDA_FN(int, zn_cuda_pointer_device, (const void *ptr), ZN_NOCUDA_RET(-1))

/* ---- Exportable device memory: cuMem, POSIX fd handles (cuda_cumem.c) ------------------- */

/* The allocation is mapped read-write for dev; size is rounded up to the granularity. */
ZN_CUDA_FN(ncclResult_t, zn_cumem_alloc, (int dev, size_t size, struct zn_cumem *out),
           ZN_NOCUDA_ERR("cuMemCreate"))
/* Grant read-write access to m to every other GPU of this process that can reach its device
 * peer to peer, as ncclMemAlloc's memory has: a program may then copy or launch on it with
 * any of its GPUs current, as it may with cudaMalloc's. */
ZN_CUDA_FN(ncclResult_t, zn_cumem_share_local, (const struct zn_cumem *m),
           ZN_NOCUDA_ERR("cuMemSetAccess"))
/* A new file descriptor for the allocation (the caller closes it). */
ZN_CUDA_FN(ncclResult_t, zn_cumem_export_fd, (const struct zn_cumem *m, int *fd),
           ZN_NOCUDA_ERR("cuMem export"))
/* Map a peer's allocation (its fd) into this process, readable and writable by dev. */
ZN_CUDA_FN(ncclResult_t, zn_cumem_import_fd, (int fd, size_t size, int dev, struct zn_cumem *out),
           ZN_NOCUDA_ERR("cuMem import"))
ZN_CUDA_FN(void, zn_cumem_free, (struct zn_cumem *m), ZN_NOCUDA_VOID)
/* Suspension (ncclCommSuspend): zn_cumem_release unmaps the memory and drops this process's
 * handle on it, but keeps the address range reserved, so that every pointer into it (kernel
 * arguments, captured graphs) is valid again once memory is mapped there anew: by
 * zn_cumem_recreate (an allocation of our own: new memory of the same size, its content
 * undefined) or zn_cumem_reimport_fd (a peer's, from its fd). The physical memory returns to the
 * driver once no process maps it and no handle or fd of it is open. zn_cumem_free frees a
 * released allocation too. */
ZN_CUDA_FN(ncclResult_t, zn_cumem_release, (struct zn_cumem *m), ZN_NOCUDA_ERR("cuMemRelease"))
ZN_CUDA_FN(ncclResult_t, zn_cumem_recreate, (struct zn_cumem *m), ZN_NOCUDA_ERR("cuMemCreate"))
ZN_CUDA_FN(ncclResult_t, zn_cumem_reimport_fd, (int fd, struct zn_cumem *m),
           ZN_NOCUDA_ERR("cuMem import"))
/* The cuMem allocation behind ptr (ncclMemFree). Returns 0 and *m, or -1 if ptr is not the
 * start of a cuMem allocation. */
ZN_CUDA_FN(int, zn_cumem_lookup, (void *ptr, struct zn_cumem *m), ZN_NOCUDA_RET(-1))
/* The cuMem allocation that contains ptr (anywhere inside it): its start, size and handle in *m
 * (not owned: the allocation keeps its reference). Returns -1 for other memory. */
ZN_CUDA_FN(int, zn_cumem_find, (const void *ptr, struct zn_cumem *m), ZN_NOCUDA_RET(-1))

/* ---- Sharing with other processes and devices (cuda_ipc.c) ----------------------------- */

/* Legacy CUDA IPC (the fallback where cuMem fds are not available). 64-byte handles. */
ZN_CUDA_FN(ncclResult_t, zn_cuda_ipc_get, (void *ptr, void *handle64), ZN_NOCUDA_ERR("CUDA IPC"))
ZN_CUDA_FN(ncclResult_t, zn_cuda_ipc_open, (const void *handle64, void **ptr),
           ZN_NOCUDA_ERR("CUDA IPC"))
ZN_CUDA_FN(void, zn_cuda_ipc_close, (void *ptr), ZN_NOCUDA_VOID)
/* A dmabuf fd for [ptr, ptr + size) of device memory (page-aligned), for a NIC to register
 * (cuMemGetHandleForAddressRange). Returns 0, or -1 where the driver or GPU cannot. */
ZN_CUDA_FN(int, zn_cuda_dmabuf_fd, (void *ptr, size_t size, int *fd), ZN_NOCUDA_RET(-1))

/* ---- Streams (cuda_stream.c) ----------------------------------------------------------- */

/* Host-driven copies (the p2p transport's one-sided puts): a non-blocking stream of this
 * process's current device, copies of any direction ordered on it, and a wait for them. A
 * source in pageable host memory may be reused as soon as the copy call returns. */
ZN_CUDA_FN(ncclResult_t, zn_cuda_stream_create, (void **stream), ZN_NOCUDA_ERR("cudaStreamCreate"))
ZN_CUDA_FN(void, zn_cuda_stream_destroy, (void *stream), ZN_NOCUDA_VOID)
ZN_CUDA_FN(ncclResult_t, zn_cuda_memcpy_async,
           (void *dst, const void *src, size_t size, void *stream),
           ZN_NOCUDA_ERR("cudaMemcpyAsync"))
/* Device to device (a peer's memory included), through the driver where it gives the entry
 * point: the runtime's cudaMemcpyAsync looks both pointers up first (the proxy's put + signal
 * round trip on 2 H100: 13.3 us against 14.1 - 15.8 through the runtime). */
ZN_CUDA_FN(ncclResult_t, zn_cuda_memcpy_dtod_async,
           (void *dst, const void *src, size_t size, void *stream),
           ZN_NOCUDA_ERR("cuMemcpyDtoDAsync"))
/* Store value at dst (device memory, also a peer's mapped here) once the stream's earlier work
 * is done and visible (cuStreamWriteValue64): no copy engine, no host buffer. -1 if the driver
 * cannot (no stream memory operations, or not for that address); nothing was queued then. */
ZN_CUDA_FN(int, zn_cuda_write_value64, (void *stream, void *dst, uint64_t value), ZN_NOCUDA_RET(-1))
ZN_CUDA_FN(ncclResult_t, zn_cuda_stream_sync, (void *stream),
           ZN_NOCUDA_ERR("cudaStreamSynchronize"))
/* Whether the stream is being captured into a graph. */
ZN_CUDA_FN(int, zn_cuda_stream_capturing, (cudaStream_t s), ZN_NOCUDA_RET(0))

/* ---- What this machine offers, for zinc-info (cuda_query.c) ---------------------------- */

/* Device and driver queries only, no memory or kernels. */
ZN_CUDA_FN(void, zn_cuda_query_system, (struct zn_cuda_system *s),
           ZN_NOCUDA_DO(memset(s, 0, sizeof(*s)); s->state = ZN_CUDA_NOT_BUILT))
ZN_CUDA_FN(ncclResult_t, zn_cuda_query_gpu, (int dev, struct zn_cuda_gpu *g),
           ZN_NOCUDA_DO(memset(g, 0, sizeof(*g)); ZN_NOCUDA_ERR("device query")))
ZN_CUDA_FN(void, zn_cuda_query_link, (int a, int b, struct zn_cuda_link *l),
           ZN_NOCUDA_DO(memset(l, 0, sizeof(*l)); l->perf_rank = -1))

/* ---- Errors (cuda_driver.c) ------------------------------------------------------------ */

/* The error string of the last CUDA error of this thread, for messages. */
ZN_CUDA_FN(const char *, zn_cuda_last_error_string, (void),
           ZN_NOCUDA_RET("no CUDA in this build"))

/* clang-format on */
