/*
 * Collective and point-to-point entry points: argument checks (every error names the argument
 * and its value, and leaves the communicator usable), op mapping, then the group machinery.
 */
#include "group.h"
#include "exec/reduce.h"
#include "util/param.h"

#include <stdint.h>
#include <string.h>

/* Values are printed as the user passed them: a datatype as the int it is, a count as the
 * size_t it is (SIZE_MAX, not -1). */
static ncclResult_t bad_int(const char *fn, const char *arg, int v)
{
    ncclResult_t r = zn_error(ncclInvalidArgument, ZN_CALL, "%s: invalid %s %d", fn, arg, v);
    zn_group_set_error(r);
    return r;
}

static ncclResult_t bad_count(const char *fn, const char *why, size_t v)
{
    ncclResult_t r =
        zn_error(ncclInvalidArgument, ZN_CALL, "%s: invalid count %zu (%s)", fn, v, why);
    zn_group_set_error(r);
    return r;
}

static ncclResult_t fail(ncclResult_t r)
{
    zn_group_set_error(r);
    return r;
}

/* ncclAvg and PreMulSum become a plain sum over pre-scaled inputs (or a sum divided at the end,
 * for integers), so algorithms and transports only know sum, prod, max and min. */
static ncclResult_t map_op(struct ncclComm *c, const char *fn, ncclRedOp_t op, ncclDataType_t dt,
                           struct zn_op_desc *out, const void **scalar_dev)
{
    memset(out, 0, sizeof(*out));
    *scalar_dev = NULL;
    switch ((int)op) {
    case ncclSum: out->red = ZN_RED_SUM; return ncclSuccess;
    case ncclProd: out->red = ZN_RED_PROD; return ncclSuccess;
    case ncclMax: out->red = ZN_RED_MAX; return ncclSuccess;
    case ncclMin: out->red = ZN_RED_MIN; return ncclSuccess;
    case ncclAvg:
        out->red = ZN_RED_SUM;
        if (zn_dtype_is_float(dt)) {
            out->premul = 1;
            zn_dtype_from_double(dt, 1.0 / c->nranks, out->scalar);
        } else {
            out->post_div = 1;
        }
        return ncclSuccess;
    default: break;
    }
    int idx = (int)op - (int)ncclNumOps;
    if (idx < 0 || idx >= c->nops || !c->ops[idx].used)
        return fail(zn_error(ncclInvalidArgument, ZN_CALL,
                             "%s: invalid op %d (not a built-in op nor a live "
                             "ncclRedOpCreatePreMulSum handle of this communicator)",
                             fn, (int)op));
    const struct zn_user_op *u = &c->ops[idx];
    if (u->dtype != dt)
        return fail(zn_error(ncclInvalidArgument, ZN_CALL,
                             "%s: op %d was created for datatype %s but the call uses %s", fn,
                             (int)op, zn_dtype_name(u->dtype), zn_dtype_name(dt)));
    out->red = ZN_RED_SUM;
    out->premul = 1;
    if (u->residence == ncclScalarHostImmediate)
        out->scalar[0] = u->value;
    else if (c->kind == ZN_COMM_CUDA)
        *scalar_dev = u->ptr; /* device memory: the kernel reads it when it runs */
    else
        memcpy(out->scalar, u->ptr, zn_dtype_size(dt));
    return ncclSuccess;
}

/* Checks common to every call on comm. */
static ncclResult_t check_comm(struct ncclComm *c, const char *fn, cudaStream_t stream)
{
    ncclResult_t r = zn_comm_check_call(c, fn, (const void *)stream);
    return r == ncclSuccess ? r : fail(r);
}

static ncclResult_t check_type(const char *fn, ncclDataType_t dt)
{
    if ((int)dt < 0 || (int)dt >= ncclNumTypes) return bad_int(fn, "datatype", (int)dt);
    return ncclSuccess;
}

static ncclResult_t check_buf(const char *fn, const char *name, const void *p, size_t count)
{
    if (!p && count > 0)
        return fail(zn_error(ncclInvalidArgument, ZN_CALL, "%s: %s is NULL with count %zu", fn,
                             name, count));
    return ncclSuccess;
}

/* The rows of algo/coll_facts.h say which ranks pass each buffer: a rank that uses none of a
 * buffer (a broadcast's sendbuff off the root) may pass NULL. */
static ncclResult_t submit_coll(enum zn_coll coll, const void *sendbuf, void *recvbuf, size_t count,
                                ncclDataType_t dt, ncclRedOp_t op, int root, ncclComm_t c,
                                cudaStream_t stream)
{
    const struct zn_coll_facts *f = zn_coll_facts(coll);
    const char *fn = f->api;
    zn_params();
    ZN_CHECK(check_comm(c, fn, stream));
    ZN_CHECK(check_type(fn, dt));
    if (f->rooted && (root < 0 || root >= c->nranks))
        return fail(zn_error(ncclInvalidArgument, ZN_CALL,
                             "%s: invalid root %d (communicator has %d ranks)", fn, root,
                             c->nranks));
    size_t es = zn_dtype_size(dt);
    if (count > SIZE_MAX / es / (size_t)c->nranks)
        return bad_count(fn, "the buffers would overflow the address space", count);
    int is_root = c->rank == root;
    ZN_CHECK(check_buf(fn, "sendbuff",
                       zn_coll_extent_used(f->send, is_root) ? sendbuf : (const void *)1, count));
    ZN_CHECK(check_buf(fn, "recvbuff",
                       zn_coll_extent_used(f->recv, is_root) ? recvbuf : (const void *)1, count));
    struct zn_gop g = { .kind = ZN_GOP_COLL, .comm = c, .stream = (void *)stream };
    if (f->reduces) ZN_CHECK(map_op(c, fn, op, dt, &g.op, &g.scalar_dev));
    g.a = (struct zn_coll_args){ .coll = coll,
                                 .sendbuf = sendbuf,
                                 .recvbuf = recvbuf,
                                 .count = count,
                                 .dtype = dt,
                                 .esize = es,
                                 .op = g.op.red,
                                 .root = f->rooted ? root : -1 };
    zn_log(ZN_LOG_INFO, ZN_CALL,
           "%s: sendbuff %p recvbuff %p count %zu datatype %s op %d root %d comm %p", fn, sendbuf,
           recvbuf, count, zn_dtype_name(dt), (int)op, root, (void *)c);
    return zn_group_submit(&g);
}

ZN_API(ncclResult_t, ncclAllReduce, const void *sendbuff, void *recvbuff, size_t count,
       ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
    return submit_coll(ZN_COLL_ALLREDUCE, sendbuff, recvbuff, count, datatype, op, 0, comm, stream);
}

ZN_API(ncclResult_t, ncclBroadcast, const void *sendbuff, void *recvbuff, size_t count,
       ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream)
{
    return submit_coll(ZN_COLL_BROADCAST, sendbuff, recvbuff, count, datatype, ncclSum, root, comm,
                       stream);
}

ZN_API(ncclResult_t, ncclBcast, void *buff, size_t count, ncclDataType_t datatype, int root,
       ncclComm_t comm, cudaStream_t stream)
{
    return submit_coll(ZN_COLL_BROADCAST, buff, buff, count, datatype, ncclSum, root, comm, stream);
}

ZN_API(ncclResult_t, ncclReduce, const void *sendbuff, void *recvbuff, size_t count,
       ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream)
{
    return submit_coll(ZN_COLL_REDUCE, sendbuff, recvbuff, count, datatype, op, root, comm, stream);
}

ZN_API(ncclResult_t, ncclAllGather, const void *sendbuff, void *recvbuff, size_t sendcount,
       ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
    return submit_coll(ZN_COLL_ALLGATHER, sendbuff, recvbuff, sendcount, datatype, ncclSum, 0, comm,
                       stream);
}

ZN_API(ncclResult_t, ncclReduceScatter, const void *sendbuff, void *recvbuff, size_t recvcount,
       ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
    return submit_coll(ZN_COLL_REDUCESCATTER, sendbuff, recvbuff, recvcount, datatype, op, 0, comm,
                       stream);
}

ZN_API(ncclResult_t, ncclAlltoAll, const void *sendbuff, void *recvbuff, size_t count,
       ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
    return submit_coll(ZN_COLL_ALLTOALL, sendbuff, recvbuff, count, datatype, ncclSum, 0, comm,
                       stream);
}

ZN_API(ncclResult_t, ncclGather, const void *sendbuff, void *recvbuff, size_t count,
       ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream)
{
    return submit_coll(ZN_COLL_GATHER, sendbuff, recvbuff, count, datatype, ncclSum, root, comm,
                       stream);
}

ZN_API(ncclResult_t, ncclScatter, const void *sendbuff, void *recvbuff, size_t count,
       ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream)
{
    return submit_coll(ZN_COLL_SCATTER, sendbuff, recvbuff, count, datatype, ncclSum, root, comm,
                       stream);
}

static ncclResult_t submit_p2p(enum zn_coll coll, void *buf, size_t count, ncclDataType_t dt,
                               int peer, ncclComm_t c, cudaStream_t stream)
{
    const struct zn_coll_facts *f = zn_coll_facts(coll);
    const char *fn = f->api;
    zn_params();
    ZN_CHECK(check_comm(c, fn, stream));
    ZN_CHECK(check_type(fn, dt));
    if (peer < 0 || peer >= c->nranks)
        return fail(zn_error(ncclInvalidArgument, ZN_CALL,
                             "%s: invalid peer %d (communicator has %d ranks)", fn, peer,
                             c->nranks));
    size_t es = zn_dtype_size(dt);
    if (count > SIZE_MAX / es)
        return bad_count(fn, "the buffer would overflow the address space", count);
    ZN_CHECK(check_buf(fn, zn_coll_extent_used(f->send, 0) ? "sendbuff" : "recvbuff", buf, count));
    struct zn_gop g = { .kind = coll == ZN_COLL_SEND ? ZN_GOP_SEND : ZN_GOP_RECV,
                        .comm = c,
                        .stream = (void *)stream };
    g.a = (struct zn_coll_args){ .coll = coll,
                                 .sendbuf = buf,
                                 .recvbuf = buf,
                                 .count = count,
                                 .dtype = dt,
                                 .esize = es,
                                 .peer = peer };
    zn_log(ZN_LOG_INFO, ZN_CALL, "%s: buff %p count %zu datatype %s peer %d comm %p", fn, buf,
           count, zn_dtype_name(dt), peer, (void *)c);
    return zn_group_submit(&g);
}

ZN_API(ncclResult_t, ncclSend, const void *sendbuff, size_t count, ncclDataType_t datatype,
       int peer, ncclComm_t comm, cudaStream_t stream)
{
    return submit_p2p(ZN_COLL_SEND, (void *)sendbuff, count, datatype, peer, comm, stream);
}

ZN_API(ncclResult_t, ncclRecv, void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
       ncclComm_t comm, cudaStream_t stream)
{
    return submit_p2p(ZN_COLL_RECV, recvbuff, count, datatype, peer, comm, stream);
}
