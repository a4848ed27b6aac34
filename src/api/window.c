/*
 * ncclCommWindowRegister / ncclCommWindowDeregister.
 *
 * Registration is collective: every rank brings a buffer, and the ranks allgather what each
 * brought (size, flags, whether the buffer is usable) so that every rank reaches the same
 * verdict from the same facts: either all get a window, or all fail with the same message
 * naming the rank at fault. NCCL's rules, as checked here:
 *   - winFlags is NCCL_WIN_DEFAULT or NCCL_WIN_COLL_SYMMETRIC, the same on every rank;
 *   - every rank registers the same size;
 *   - a symmetric window's buffer starts on an NCCL_WIN_REQUIRED_ALIGNMENT (4096-byte)
 *     boundary, so that the same offset is equally aligned in every rank's window.
 *
 * Every window also gets its device-API view (devwin.c): on a cuda communicator whose GPUs
 * map each other, the buffer is mapped into every peer and the handle returned is the record
 * kernels read, in device memory; on a host communicator the handle is the host record below.
 * A handle is accepted only if it is on the communicator's list, so a stale or foreign handle
 * is rejected without being dereferenced. Deregistration is local (no peer is involved in
 * freeing a record).
 */
#include "devapi.h"
#include "group.h"
#include "mgmt.h"
#include "rma.h"

#include <stdint.h>
#include <stdlib.h>

struct zn_window {
    struct ncclComm *comm;
    void *buf;
    size_t size;
    int flags;
    struct zn_devwin *dw;   /* the device API's view; its handle is the user's */
    struct zn_rma_win *rma; /* what puts into it need (rma.c), or NULL */
    struct zn_window *next;
};

/* What one rank brought, as allgathered. */
struct win_entry {
    uint64_t size;
    uint64_t addr;
    int32_t flags;
    int32_t problem;
};

enum { WIN_OK, WIN_BAD_FLAGS, WIN_NULL_BUFF, WIN_MISALIGNED };

static int entry_problem(void *buff, size_t size, int flags)
{
    if (flags & ~NCCL_WIN_COLL_SYMMETRIC) return WIN_BAD_FLAGS;
    if (!buff && size) return WIN_NULL_BUFF;
    if ((flags & NCCL_WIN_COLL_SYMMETRIC) && (uintptr_t)buff % NCCL_WIN_REQUIRED_ALIGNMENT)
        return WIN_MISALIGNED;
    return WIN_OK;
}

/* The same verdict on every rank, from the allgathered entries. */
static ncclResult_t judge(const struct win_entry *all, int n)
{
    for (int r = 0; r < n; r++) {
        const struct win_entry *e = &all[r];
        switch (e->problem) {
        case WIN_OK: break;
        case WIN_BAD_FLAGS:
            return zn_error(ncclInvalidArgument, ZN_CALL,
                            "ncclCommWindowRegister: rank %d passed winFlags 0x%x (valid: "
                            "NCCL_WIN_DEFAULT, NCCL_WIN_COLL_SYMMETRIC)",
                            r, (unsigned)e->flags);
        case WIN_NULL_BUFF:
            return zn_error(ncclInvalidArgument, ZN_CALL,
                            "ncclCommWindowRegister: rank %d passed buff NULL with size %llu", r,
                            (unsigned long long)e->size);
        case WIN_MISALIGNED:
            return zn_error(ncclInvalidArgument, ZN_CALL,
                            "ncclCommWindowRegister: rank %d passed buff 0x%llx for a "
                            "NCCL_WIN_COLL_SYMMETRIC window, which is not a multiple of "
                            "NCCL_WIN_REQUIRED_ALIGNMENT (%d)",
                            r, (unsigned long long)e->addr, NCCL_WIN_REQUIRED_ALIGNMENT);
        default:
            return zn_error(ncclInternalError, ZN_CALL,
                            "ncclCommWindowRegister: rank %d sent a malformed entry", r);
        }
    }
    for (int r = 1; r < n; r++) {
        if (all[r].flags != all[0].flags)
            return zn_error(ncclInvalidUsage, ZN_CALL,
                            "ncclCommWindowRegister: winFlags differ: rank 0 passed 0x%x, rank "
                            "%d passed 0x%x",
                            (unsigned)all[0].flags, r, (unsigned)all[r].flags);
        if (all[r].size != all[0].size)
            return zn_error(ncclInvalidUsage, ZN_CALL,
                            "ncclCommWindowRegister: sizes differ: rank 0 registers %llu bytes, "
                            "rank %d %llu bytes (every rank must register the same size)",
                            (unsigned long long)all[0].size, r, (unsigned long long)all[r].size);
    }
    return ncclSuccess;
}

static ncclResult_t check_state(struct ncclComm *comm, const char *fn)
{
    if (atomic_load(&comm->revoked))
        return zn_error(ncclInvalidUsage, ZN_CALL, "%s: comm %p was revoked (ncclCommRevoke)", fn,
                        (void *)comm);
    ncclResult_t st = (ncclResult_t)atomic_load(&comm->async_err);
    if (st == ncclInProgress)
        return zn_error(ncclInvalidUsage, ZN_CALL,
                        "%s: comm %p is still busy with a non-blocking call (init, finalize): "
                        "wait for ncclCommGetAsyncError to return ncclSuccess",
                        fn, (void *)comm);
    if (st != ncclSuccess)
        return zn_error(st, ZN_CALL, "%s: comm %p failed earlier (%s)", fn, (void *)comm,
                        comm->last_error);
    return ncclSuccess;
}

static ncclResult_t do_register(struct ncclComm *comm, void *buff, size_t size, int flags,
                                struct zn_window **out)
{
    struct win_entry *all = calloc((size_t)comm->nranks, sizeof(*all));
    if (!all) return zn_error(ncclSystemError, ZN_CALL, "out of memory");
    all[comm->rank] = (struct win_entry){ .size = size,
                                          .addr = (uint64_t)(uintptr_t)buff,
                                          .flags = flags,
                                          .problem = entry_problem(buff, size, flags) };
    ncclResult_t res = zn_boot_allgather(comm->boot, all, sizeof(*all));
    if (res == ncclSuccess) res = judge(all, comm->nranks);
    free(all);
    if (res != ncclSuccess) return res;
    struct zn_window *w = calloc(1, sizeof(*w));
    if (!w) return zn_error(ncclSystemError, ZN_CALL, "out of memory");
    *w = (struct zn_window){ .comm = comm, .buf = buff, .size = size, .flags = flags };
    res = zn_devwin_create(comm, buff, size, w, &w->dw);
    if (res != ncclSuccess) {
        free(w);
        return res;
    }
    res = zn_rma_win_create(comm, buff, size, &w->rma);
    if (res != ncclSuccess) {
        zn_devwin_destroy(w->dw, 1);
        free(w);
        return res;
    }
    *out = w;
    return ncclSuccess;
}

/* One registration, run now or at the end of the caller's group (zn_group_defer). */
struct reg_call {
    struct ncclComm *comm;
    void *buff;
    size_t size;
    ncclWindow_t *win;
    int flags;
};

static ncclResult_t register_call(void *arg, int run)
{
    struct reg_call *c = arg;
    struct ncclComm *comm = c->comm;
    ncclResult_t res = ncclSuccess;
    if (!run) goto out;
    atomic_fetch_add(&comm->busy, 1);
    struct zn_window *w = NULL;
    res = do_register(comm, c->buff, c->size, c->flags, &w);
    if (res == ncclSuccess) {
        w->next = comm->windows;
        comm->windows = w;
        *c->win = (ncclWindow_t)w->dw->handle;
        zn_info(ZN_CALL, "comm %p: window %p registered (%p, %zu bytes, flags 0x%x)", (void *)comm,
                (void *)*c->win, c->buff, c->size, (unsigned)c->flags);
    }
    atomic_fetch_sub(&comm->busy, 1);
out:
    free(c);
    return res;
}

/* Inside a group the registration runs at ncclGroupEnd (*win is written then): with one
 * process driving several GPUs, the ranks' registrations, each waiting for the others, must
 * run together. */
ZN_API(ncclResult_t, ncclCommWindowRegister, ncclComm_t comm, void *buff, size_t size,
       ncclWindow_t *win, int winFlags)
{
    ZN_CHECK(zn_comm_check_active(comm, "ncclCommWindowRegister"));
    if (!win) return zn_error(ncclInvalidArgument, ZN_CALL, "ncclCommWindowRegister: win is NULL");
    ZN_CHECK(check_state(comm, "ncclCommWindowRegister"));
    struct reg_call *c = malloc(sizeof(*c));
    if (!c) return zn_error(ncclSystemError, ZN_CALL, "out of memory");
    *c = (struct reg_call){
        .comm = comm, .buff = buff, .size = size, .win = win, .flags = winFlags
    };
    return zn_group_defer(comm, register_call, c);
}

ZN_API(ncclResult_t, ncclCommWindowDeregister, ncclComm_t comm, ncclWindow_t win)
{
    ZN_CHECK(zn_comm_check(comm, "ncclCommWindowDeregister"));
    struct zn_window **p = &comm->windows;
    while (*p && (ncclWindow_t)(*p)->dw->handle != win) p = &(*p)->next;
    if (!win || !*p)
        return zn_error(ncclInvalidArgument, ZN_CALL,
                        "ncclCommWindowDeregister: win %p is not a window registered on comm %p "
                        "(deregistered already, or registered on another communicator?)",
                        (void *)win, (void *)comm);
    struct zn_window *w = *p;
    *p = w->next;
    zn_rma_win_destroy(comm, w->rma);
    zn_devwin_destroy(w->dw, 1);
    free(w);
    return ncclSuccess;
}

int zn_window_lookup(const struct ncclComm *c, ncclWindow_t win, struct zn_window_parts *out)
{
    const struct zn_window *w = c->windows;
    while (w && (ncclWindow_t)w->dw->handle != win) w = w->next;
    if (!w || !win) return 0;
    *out = (struct zn_window_parts){ .buf = w->buf, .size = w->size, .dw = w->dw, .rma = w->rma };
    return 1;
}

/* NCCL returns the buffer's host pointer (the address the user registered). */
ZN_API(ncclResult_t, ncclWinGetUserPtr, ncclComm_t comm, ncclWindow_t win, void **outUserPtr)
{
    ZN_CHECK(zn_comm_check(comm, "ncclWinGetUserPtr"));
    if (!outUserPtr)
        return zn_error(ncclInvalidArgument, ZN_CALL, "ncclWinGetUserPtr: outUserPtr is NULL");
    struct zn_window_parts w;
    if (!zn_window_lookup(comm, win, &w))
        return zn_error(ncclInvalidArgument, ZN_CALL,
                        "ncclWinGetUserPtr: win %p is not a window registered on comm %p "
                        "(deregistered already, or registered on another communicator?)",
                        (void *)win, (void *)comm);
    *outUserPtr = w.buf;
    return ncclSuccess;
}

void zn_windows_free(struct ncclComm *c)
{
    zn_rma_stop(c);
    zn_devcomms_free(c);
    while (c->windows) {
        struct zn_window *w = c->windows;
        c->windows = w->next;
        zn_rma_win_destroy(c, w->rma);
        zn_devwin_destroy(w->dw, 0);
        free(w);
    }
    zn_rma_free(c);
}
