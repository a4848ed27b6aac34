/*
 * Windows as the device API sees them: every LSA rank's buffer mapped in this process, the
 * record kernels read (struct ncclWindow_vidmem, in device memory), and the host queries
 * ncclGetLsaDevicePointer / ncclGetPeerDevicePointer.
 *
 * Mapping reuses the p2p transport's registration (the one ncclCommRegister uses): the
 * buffer's cuMem allocation is exported as a file descriptor and every peer's process service
 * imports it. Each rank learns where every peer mapped its own buffer; an allgather of those
 * addresses tells each rank where it sees every peer's buffer. A buffer that is not
 * exportable cuMem memory (cudaMalloc) cannot be mapped that way: registration then fails on
 * every rank with a message that says to allocate with ncclMemAlloc.
 *
 * Records are kept in one process-wide list, because the pointer queries get only the
 * window handle; a handle not on the list is rejected without being dereferenced.
 */
#include "devapi.h"
#include "group.h"
#include "transport/gpu_peer.h"
#include "util/cuda.h"

#include <pthread.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t devwin_lock = PTHREAD_MUTEX_INITIALIZER;
static struct zn_devwin *devwins;

void zn_dev_lsa(const struct ncclComm *comm, int *size, int *rank)
{
    if (comm->kind == ZN_COMM_CUDA && comm->p2p_state && comm->nranks <= ZINC_DEVICE_LSA_MAX) {
        *size = comm->nranks;
        *rank = comm->rank;
    } else {
        *size = 1;
        *rank = 0;
    }
}

/* What a rank allgathers: whether its side worked, and where each rank maps its buffer. */
struct where_entry {
    int32_t ok;
    int32_t pad;
    uint64_t at[ZINC_DEVICE_LSA_MAX];
};

/* Map buf into every LSA peer (LSA team > 1): fills view.lsaPtrs. All ranks map or none does:
 * a buffer one rank cannot share (not exportable cuMem memory, such as cudaMalloc's) leaves
 * the window registered but unmapped (w->unmapped), as registration succeeded before zinc had
 * the device API; the pointer queries and ncclDevCommCreate then refuse it, saying why. Fails
 * only if the ranks cannot agree (bootstrap). */
static ncclResult_t map_peers(struct ncclComm *comm, void *buf, size_t size, struct zn_devwin *w)
{
    struct where_entry *all = calloc((size_t)comm->nranks, sizeof(*all));
    if (!all) return zn_error(ncclSystemError, ZN_CALL, "out of memory");
    struct zn_cumem m;
    if (zn_cumem_find(buf, &m) != 0) {
        snprintf(w->why, sizeof(w->why), "rank %d's buffer %p is not exportable cuMem memory",
                 comm->rank, buf);
    } else if (zn_transport_p2p.reg(comm->p2p_state, buf, size, &w->reg) != ncclSuccess ||
               !w->reg) {
        snprintf(w->why, sizeof(w->why), "rank %d could not share its buffer %p: %s", comm->rank,
                 buf, zn_last_error());
        zn_clear_last_error();
        w->reg = NULL;
    }
    struct where_entry *me = &all[comm->rank];
    if (w->reg) {
        const struct zn_reg_entry *e = w->reg;
        uintptr_t off = (uintptr_t)buf - e->base;
        me->ok = 1;
        for (int r = 0; r < comm->nranks; r++)
            me->at[r] = r == comm->rank ? (uint64_t)(uintptr_t)buf
                                        : (uint64_t)((uintptr_t)e->peer[r] + off);
    }
    ncclResult_t res = zn_boot_allgather(comm->boot, all, sizeof(*all));
    int bad = -1;
    for (int r = 0; res == ncclSuccess && r < comm->nranks && bad < 0; r++)
        if (!all[r].ok) bad = r;
    if (res == ncclSuccess && bad < 0) {
        for (int r = 0; r < comm->nranks; r++)
            w->view.lsaPtrs[r] = (char *)(uintptr_t)all[r].at[comm->rank];
    } else if (res == ncclSuccess) {
        if (!w->why[0])
            snprintf(w->why, sizeof(w->why), "rank %d could not map its buffer (see its log)", bad);
        w->unmapped = 1;
        zn_info(ZN_CALL,
                "ncclCommWindowRegister: window registered without peer mappings (%s); the "
                "device API needs window buffers from ncclMemAlloc",
                w->why);
        if (w->reg) zn_transport_p2p.dereg(comm->p2p_state, w->reg);
        w->reg = NULL;
    }
    free(all);
    return res;
}

ncclResult_t zn_devwin_create(struct ncclComm *comm, void *buf, size_t size, void *host_handle,
                              struct zn_devwin **out)
{
    struct zn_devwin *w = calloc(1, sizeof(*w));
    if (!w) return zn_error(ncclSystemError, ZN_CALL, "out of memory");
    int lsa_size, lsa_rank;
    zn_dev_lsa(comm, &lsa_size, &lsa_rank);
    w->comm = comm;
    w->view = (struct ncclWindow_vidmem){ .lsaFlatBase = buf,
                                          .lsaRank = lsa_rank,
                                          .worldRank = comm->rank,
                                          .lsaSize = lsa_size,
                                          .zincMagic = ZINC_DEVICE_WINDOW_MAGIC,
                                          .size = size };
    w->view.lsaPtrs[lsa_rank] = buf;
    /* The id GIN requests name the window by on every rank: windows are made collectively,
     * in the same order everywhere (0 is the device communicators' resource window). */
    w->view.ginOffset4K = ++comm->devwin_ids;
    ncclResult_t res = ncclSuccess;
    int cur = -1;
    if (comm->kind == ZN_COMM_CUDA) {
        cur = zn_cuda_enter(comm->cuda_dev);
        if (cur < 0) ZN_CHECK_GOTO(zn_cuda_set_device(comm->cuda_dev), res, fail);
    }
    if (lsa_size > 1 && size > 0) ZN_CHECK_GOTO(map_peers(comm, buf, size, w), res, fail);
    if (comm->kind == ZN_COMM_CUDA) {
        void *dev = NULL;
        ZN_CHECK_GOTO(zn_cuda_malloc(&dev, sizeof(w->view), "window record"), res, fail);
        w->dev = dev;
        w->view.winHost = w;
        ZN_CHECK_GOTO(zn_cuda_memcpy_htod(w->dev, &w->view, sizeof(w->view)), res, fail);
        w->handle = w->dev;
    } else {
        w->view.winHost = w;
        w->handle = host_handle;
    }
    zn_cuda_leave(comm->cuda_dev, cur);
    pthread_mutex_lock(&devwin_lock);
    w->next = devwins;
    devwins = w;
    pthread_mutex_unlock(&devwin_lock);
    *out = w;
    return ncclSuccess;
fail:
    zn_cuda_leave(comm->cuda_dev, cur);
    zn_devwin_destroy(w, 1);
    return res;
}

void zn_devwin_destroy(struct zn_devwin *w, int unmap)
{
    if (!w) return;
    pthread_mutex_lock(&devwin_lock);
    for (struct zn_devwin **p = &devwins; *p; p = &(*p)->next) {
        if (*p == w) {
            *p = w->next;
            break;
        }
    }
    pthread_mutex_unlock(&devwin_lock);
    /* dereg waits for the device, so no kernel still reads the record or the buffer. */
    if (w->reg && unmap) zn_transport_p2p.dereg(w->comm->p2p_state, w->reg);
    if (w->dev) zn_cuda_free(w->dev);
    free(w);
}

size_t zn_devwins_gpu_bytes(const struct ncclComm *comm)
{
    size_t n = 0;
    pthread_mutex_lock(&devwin_lock);
    for (const struct zn_devwin *w = devwins; w; w = w->next)
        if (w->comm == comm) n += zn_cuda_alloc_bytes(w->dev);
    pthread_mutex_unlock(&devwin_lock);
    return n;
}

struct zn_devwin *zn_devwin_find(const void *win)
{
    if (!win) return NULL;
    pthread_mutex_lock(&devwin_lock);
    struct zn_devwin *w = devwins;
    while (w && w->handle != win) w = w->next;
    pthread_mutex_unlock(&devwin_lock);
    return w;
}

ncclResult_t zn_devwin_gin_target(struct ncclComm *comm, uint32_t id, uint64_t off, uint64_t len,
                                  void **ptr)
{
    pthread_mutex_lock(&devwin_lock);
    struct zn_devwin *w = devwins;
    while (w && !(w->comm == comm && w->view.ginOffset4K == id)) w = w->next;
    size_t size = w ? w->view.size : 0;
    char *base = w ? w->view.lsaFlatBase : NULL;
    pthread_mutex_unlock(&devwin_lock);
    if (!w)
        return zn_error(ncclInvalidUsage, ZN_CALL,
                        "GIN: a peer put into window %u of rank %d, which has no such window "
                        "(deregistered, or registered in another order than on the peer)",
                        id, comm->rank);
    if (off > size || len > size - off)
        return zn_error(ncclInvalidUsage, ZN_CALL,
                        "GIN: a peer put bytes [%llu, +%llu) into window %u of rank %d, which has "
                        "%zu bytes",
                        (unsigned long long)off, (unsigned long long)len, id, comm->rank, size);
    *ptr = base + off;
    return ncclSuccess;
}

static ncclResult_t lookup(ncclWindow_t window, size_t offset, void **outPtr, const char *fn,
                           struct zn_devwin **out)
{
    if (!outPtr) return zn_error(ncclInvalidArgument, ZN_CALL, "%s: outPtr is NULL", fn);
    struct zn_devwin *w = zn_devwin_find(window);
    if (!w)
        return zn_error(ncclInvalidArgument, ZN_CALL,
                        "%s: window %p is not a registered window (ncclCommWindowRegister; "
                        "deregistered already?)",
                        fn, (void *)window);
    if (offset >= w->view.size)
        return zn_error(ncclInvalidArgument, ZN_CALL,
                        "%s: offset %zu is past the window's %zu bytes", fn, offset, w->view.size);
    *out = w;
    return ncclSuccess;
}

ZN_API(ncclResult_t, ncclGetLsaDevicePointer, ncclWindow_t window, size_t offset, int lsaRank,
       void **outPtr)
{
    struct zn_devwin *w;
    ZN_CHECK(lookup(window, offset, outPtr, "ncclGetLsaDevicePointer", &w));
    if (lsaRank < 0 || lsaRank >= w->view.lsaSize)
        return zn_error(ncclInvalidArgument, ZN_CALL,
                        "ncclGetLsaDevicePointer: lsaRank %d is outside the LSA team of %d ranks",
                        lsaRank, w->view.lsaSize);
    *outPtr = w->view.lsaPtrs[lsaRank] + offset;
    return ncclSuccess;
}

ZN_API(ncclResult_t, ncclGetPeerDevicePointer, ncclWindow_t window, size_t offset, int peer,
       void **outPtr)
{
    struct zn_devwin *w;
    ZN_CHECK(lookup(window, offset, outPtr, "ncclGetPeerDevicePointer", &w));
    long long lsa = (long long)w->view.lsaRank + ((long long)peer - w->view.worldRank);
    if (peer < 0 || peer >= w->comm->nranks || lsa < 0 || lsa >= w->view.lsaSize)
        return zn_error(ncclInvalidArgument, ZN_CALL,
                        "ncclGetPeerDevicePointer: rank %d is not in the LSA team of rank %d (%d "
                        "ranks whose GPU memory this GPU maps)",
                        peer, w->view.worldRank, w->view.lsaSize);
    *outPtr = w->view.lsaPtrs[lsa] + offset;
    return ncclSuccess;
}

ZN_API(ncclResult_t, ncclGetLsaMultimemDevicePointer, ncclWindow_t window, size_t offset,
       void **outPtr)
{
    return zn_error(ncclInvalidUsage, ZN_CALL,
                    "ncclGetLsaMultimemDevicePointer: multimem (NVLink multicast) is not "
                    "supported by zinc; use ncclGetLsaDevicePointer for each LSA rank");
}

/* ncclDevCommWindowTable as C sees it (the header defines it for C++ only). */
struct win_table {
    struct {
        uintptr_t base, size;
        void *window;
    } e[32];
    struct win_table *next;
};
_Static_assert(sizeof(struct win_table) == 32 * 24 + 8, "ncclDevCommWindowTable layout");

ncclResult_t zn_devwin_table(struct ncclComm *comm, void **out)
{
    pthread_mutex_lock(&devwin_lock);
    int n = 0;
    for (struct zn_devwin *w = devwins; w; w = w->next) n += w->comm == comm && w->dev;
    int ntab = n ? (n + 31) / 32 : 1;
    struct win_table *host = calloc((size_t)ntab, sizeof(*host));
    if (!host) {
        pthread_mutex_unlock(&devwin_lock);
        return zn_error(ncclSystemError, ZN_CALL, "out of memory");
    }
    int i = 0;
    for (struct zn_devwin *w = devwins; w; w = w->next) {
        if (w->comm != comm || !w->dev) continue;
        host[i / 32].e[i % 32].base = (uintptr_t)w->view.lsaFlatBase;
        host[i / 32].e[i % 32].size = w->view.size;
        host[i / 32].e[i % 32].window = w->dev;
        i++;
    }
    pthread_mutex_unlock(&devwin_lock);
    void *dev = NULL;
    ncclResult_t res = zn_cuda_malloc(&dev, (size_t)ntab * sizeof(*host), "window table");
    if (res == ncclSuccess) {
        for (int t = 0; t + 1 < ntab; t++) host[t].next = (struct win_table *)dev + t + 1;
        res = zn_cuda_memcpy_htod(dev, host, (size_t)ntab * sizeof(*host));
        if (res != ncclSuccess) zn_cuda_free(dev);
    }
    free(host);
    if (res == ncclSuccess) *out = dev;
    return res;
}
