/*
 * NCCL 2.30's device API, host side (devcomm.c, devwin.c, devgin.c, devlayout.c): the records
 * behind device communicators and the device view of windows.
 *
 * The public types come from include/nccl_device/core.h, which is plain C for the host: the
 * structs a program passes (requirements, properties, handles, ncclDevComm) are NCCL 2.30.7's
 * layouts, and those of NCCL 2.28.9 are read too (devlayout.c, devapi_legacy.h); the window
 * record kernels read (struct ncclWindow_vidmem) is zinc's (see that header).
 *
 * LSA team. A communicator whose ranks are all on one host with every GPU mapping every other
 * (the p2p transport's full mode, comm->p2p_state set) has all its ranks in one LSA team;
 * any other communicator (several hosts, ring mode, host communicators) has LSA teams of one
 * rank. zinc's p2p layer maps GPU memory only within such a full group, so that is the
 * largest team whose members' kernels can load and store each other's memory.
 */
#ifndef ZN_API_DEVAPI_H
#define ZN_API_DEVAPI_H

#include "comm.h"
#include "nccl_device/core.h"

/* The calling rank's LSA team in the communicator: size and rank. */
void zn_dev_lsa(const struct ncclComm *comm, int *size, int *rank);

/* The device view of one window: where each LSA rank's buffer is mapped in this process, and
 * (cuda communicators) a copy of it in device memory that kernels read through the
 * ncclWindow_t handle. Host communicators get the record without a device copy. */
struct zn_devwin {
    struct ncclComm *comm;
    void *handle; /* the ncclWindow_t the user holds */
    struct ncclWindow_vidmem view;
    struct ncclWindow_vidmem *dev; /* device copy, or NULL */
    void *reg;                     /* the p2p transport's registration, or NULL */
    int unmapped;                  /* LSA team > 1 but the buffer is not in the peers */
    char why[256];                 /* why it is unmapped */
    struct zn_devwin *next;
};

/* Collective over the communicator (every rank, in the same order, after the window's
 * arguments were agreed): map buf into every LSA peer and build the record. Fails on every
 * rank if it fails on one. host_handle is the handle to use when no device copy is made. */
ncclResult_t zn_devwin_create(struct ncclComm *comm, void *buf, size_t size, void *host_handle,
                              struct zn_devwin **out);
/* Local: drop the device copy and the peers' mappings (unmap: 0 when the communicator is
 * being freed, where peers may be gone and drop their mappings themselves). */
void zn_devwin_destroy(struct zn_devwin *w, int unmap);
/* Where bytes [off, off + len) of comm's window of GIN id `id` (ncclWindow_vidmem.ginOffset4K)
 * are in this process; an error naming the window and range if there is none. */
ncclResult_t zn_devwin_gin_target(struct ncclComm *comm, uint32_t id, uint64_t off, uint64_t len,
                                  void **ptr);
/* The record whose handle is win, or NULL. */
struct zn_devwin *zn_devwin_find(const void *win);

/* A copy in device memory of the windows of comm that have a device record, as the chain of
 * ncclDevCommWindowTable that ncclFindWindow searches (one empty table if there are none). */
ncclResult_t zn_devwin_table(struct ncclComm *comm, void **out);

/* GIN between hosts for one device communicator (devgin.c): the FIFO record in mapped host
 * memory that kernels reach through ncclDevComm.ginHandles[2], and the engine thread that
 * serves it (proxy/gin.h). res_base / res_bytes are this rank's resource window. Collective. */
struct zn_devgin;
ncclResult_t zn_devgin_create(struct ncclComm *comm, char *res_base, size_t res_bytes, int nsignals,
                              int ncounters, struct zn_devgin **out, void **dev_record);
/* drain: finish the peers' operations first (collective, ncclDevCommDestroy); else stop at
 * once (the communicator is being freed or aborted). */
void zn_devgin_destroy(struct zn_devgin *g, int drain);
/* Make every GIN wait of the kernels on this device communicator stop (the engine's error
 * word), before freeing it without its peers. */
void zn_devgin_stop_kernels(struct zn_devgin *g);

/* The caller's structs of either layout (devlayout.c). */
/* Counts above this in a requirement are refused: no kernel needs so many, and a 2.30 struct
 * zeroed by hand reads as a 2.28.9 one with counts like these (devlayout.c). */
#define ZN_DEVAPI_COUNT_MAX (1 << 24)
/* *user as 2.30.7's requirements, every field set; r->version is the NCCL version of the
 * caller's header (22809 for the 2.28.9 layout, whose barrierCount is folded into
 * lsaBarrierCount / railGinBarrierCount and whose GIN use sets ginConnectionType). */
ncclResult_t zn_devreqs_read(const void *user, ncclDevCommRequirements_t *r);
/* Write c (2.30.7's layout) to the caller's device communicator, in the layout of
 * c->version: the 2.28.9 one for 22809. */
void zn_devcomm_write(void *user, const ncclDevComm_t *c);
/* The resourceWindow of a caller's device communicator of either layout. */
ncclResult_t zn_devcomm_read_window(const void *user, ncclWindow_t *win);
/* Check the caller's properties (magic, version, size) and write mine's fields that fit. */
ncclResult_t zn_props_write(ncclCommProperties_t *user, const ncclCommProperties_t *mine);

/* Free the device communicators still alive on comm (destroy, abort). */
void zn_devcomms_free(struct ncclComm *comm);

/* Device memory of the device API on comm, for ncclCommMemStats (comm's device current): its
 * device communicators (resource arenas, records, window tables, GIN ticket counters; retired
 * ones too, which stay until comm goes) and its windows' records. A user's buffers are not
 * counted. All of it stays while comm is suspended: kernels were handed pointers to it. */
size_t zn_devcomms_gpu_bytes(const struct ncclComm *comm);
size_t zn_devwins_gpu_bytes(const struct ncclComm *comm);
size_t zn_devgin_gpu_bytes(const struct zn_devgin *g);

#endif
