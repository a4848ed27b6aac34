/* Version, error strings, last error, reduction ops, memory and registration entry points. */
#include "group.h"
#include "util/cuda.h"
#include "exec/reduce.h"
#include "util/param.h"
#include "zinc.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

ZN_API(ncclResult_t, ncclGetVersion, int *version)
{
    if (!version) return zn_error(ncclInvalidArgument, ZN_CALL, "ncclGetVersion: version is NULL");
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}

ZN_API(const char *, ncclGetErrorString, ncclResult_t result)
{
    return zn_result_str(result);
}

ZN_API(const char *, ncclGetLastError, ncclComm_t comm)
{
    /* The calling thread's last error is the freshest; a communicator keeps the error that
     * broke it, readable from any thread. */
    if (comm && comm->magic == ZN_COMM_MAGIC && comm->last_error[0] &&
        (!zn_last_error()[0] || atomic_load(&comm->async_err) != ncclSuccess))
        return comm->last_error;
    return zn_last_error();
}

/* nccl.h declares these only for NCCL_OS_LINUX builds (else they are empty macros), as
 * NCCL's header does; the library exports them either way. */
#undef ncclResetDebugInit
#undef pncclResetDebugInit
ZN_EXPORT void ncclResetDebugInitInternal(void);
void ncclResetDebugInitInternal(void)
{
    /* Re-reading the parameters re-applies the logging ones. */
    zn_params_reload();
}

ZN_EXPORT void pncclResetDebugInit(void) __attribute__((alias("ncclResetDebugInitInternal")));
ZN_EXPORT void ncclResetDebugInit(void) __attribute__((alias("ncclResetDebugInitInternal")));

ZN_API(ncclResult_t, ncclRedOpCreatePreMulSum, ncclRedOp_t *op, void *scalar,
       ncclDataType_t datatype, ncclScalarResidence_t residence, ncclComm_t comm)
{
    ZN_CHECK(zn_comm_check(comm, "ncclRedOpCreatePreMulSum"));
    if (!op || !scalar)
        return zn_error(ncclInvalidArgument, ZN_CALL, "ncclRedOpCreatePreMulSum: %s is NULL",
                        !op ? "op" : "scalar");
    if ((int)datatype < 0 || (int)datatype >= ncclNumTypes)
        return zn_error(ncclInvalidArgument, ZN_CALL,
                        "ncclRedOpCreatePreMulSum: invalid datatype %d", (int)datatype);
    if (residence != ncclScalarDevice && residence != ncclScalarHostImmediate)
        return zn_error(ncclInvalidArgument, ZN_CALL,
                        "ncclRedOpCreatePreMulSum: invalid residence %d", (int)residence);
    int idx = 0;
    while (idx < comm->nops && comm->ops[idx].used) idx++;
    if (idx == comm->nops) {
        int cap = comm->nops ? comm->nops * 2 : 8;
        struct zn_user_op *n = realloc(comm->ops, (size_t)cap * sizeof(*n));
        if (!n) return zn_error(ncclSystemError, ZN_CALL, "out of memory");
        memset(n + comm->nops, 0, (size_t)(cap - comm->nops) * sizeof(*n));
        comm->ops = n;
        comm->nops = cap;
    }
    struct zn_user_op *u = &comm->ops[idx];
    memset(u, 0, sizeof(*u));
    u->used = 1;
    u->dtype = datatype;
    u->residence = residence;
    if (residence == ncclScalarHostImmediate)
        memcpy(&u->value, scalar, zn_dtype_size(datatype));
    else
        u->ptr = scalar;
    *op = (ncclRedOp_t)((int)ncclNumOps + idx);
    return ncclSuccess;
}

ZN_API(ncclResult_t, ncclRedOpDestroy, ncclRedOp_t op, ncclComm_t comm)
{
    ZN_CHECK(zn_comm_check(comm, "ncclRedOpDestroy"));
    int idx = (int)op - (int)ncclNumOps;
    if ((int)op < (int)ncclNumOps)
        return zn_error(ncclInvalidArgument, ZN_CALL,
                        "ncclRedOpDestroy: op %d is a built-in op, not one made by "
                        "ncclRedOpCreatePreMulSum",
                        (int)op);
    if (idx >= comm->nops || !comm->ops[idx].used)
        return zn_error(ncclInvalidArgument, ZN_CALL,
                        "ncclRedOpDestroy: op %d is not a live op of this communicator", (int)op);
    comm->ops[idx].used = 0;
    return ncclSuccess;
}

/* Host communicators read and write user memory directly, so registration has nothing to pin
 * or map: the handle only records the range, so that deregistration can be checked. On a cuda
 * communicator whose GPUs all map each other, the p2p transport registers the buffer too
 * (transport/gpu_peer.h: a cuMem allocation that can be exported, as ncclMemAlloc makes, is mapped
 * by every peer), and allreduces whose buffers are all registered then run zero-copy
 * (exec/cuda_exec.c). Other memory stays bookkeeping only. */
struct zn_reg {
    uint64_t magic;
    struct ncclComm *comm;
    void *buf;
    size_t size;
    void *handle; /* the p2p transport's, or NULL: not registered there */
};
#define ZN_REG_MAGIC 0x7a6e726567ull

ZN_API(ncclResult_t, ncclCommRegister, const ncclComm_t comm, void *buff, size_t size,
       void **handle)
{
    ZN_CHECK(zn_comm_check(comm, "ncclCommRegister"));
    if (!handle || (!buff && size))
        return zn_error(ncclInvalidArgument, ZN_CALL, "ncclCommRegister: %s is NULL",
                        !handle ? "handle" : "buff");
    struct zn_reg *r = calloc(1, sizeof(*r));
    if (!r) return zn_error(ncclSystemError, ZN_CALL, "out of memory");
    *r = (struct zn_reg){ .magic = ZN_REG_MAGIC, .comm = comm, .buf = buff, .size = size };
    ncclResult_t res = ncclSuccess;
    if (comm->p2p_state && size)
        res = zn_transport_p2p.reg(comm->p2p_state, buff, size, &r->handle);
    if (res != ncclSuccess) {
        free(r);
        return res;
    }
    *handle = r;
    return ncclSuccess;
}

ZN_API(ncclResult_t, ncclCommDeregister, const ncclComm_t comm, void *handle)
{
    ZN_CHECK(zn_comm_check(comm, "ncclCommDeregister"));
    struct zn_reg *r = handle;
    if (!r || r->magic != ZN_REG_MAGIC || r->comm != comm)
        return zn_error(ncclInvalidArgument, ZN_CALL,
                        "ncclCommDeregister: handle %p was not returned by ncclCommRegister on "
                        "this communicator",
                        handle);
    if (r->handle) ZN_CHECK(zn_transport_p2p.dereg(comm->p2p_state, r->handle));
    r->magic = 0;
    free(r);
    return ncclSuccess;
}

ZN_EXPORT const char *zincGetVersionString(void)
{
    return ZINC_VERSION_STRING;
}

ZN_EXPORT ncclResult_t zincCommIsHost(const ncclComm_t comm, int *isHost)
{
    ZN_CHECK(zn_comm_check(comm, "zincCommIsHost"));
    if (!isHost) return zn_error(ncclInvalidArgument, ZN_CALL, "zincCommIsHost: isHost is NULL");
    *isHost = comm->kind == ZN_COMM_HOST;
    return ncclSuccess;
}
