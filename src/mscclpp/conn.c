/*
 * Connections: declared on each side (mscclppConnect), then matched with the peers'
 * declarations and set up by mscclppConnectionSetup.
 *
 * Setup of one round (the connections declared since the last setup), on every rank:
 *   1. prepare this side of each new connection (SHM: the signal segment of the round; P2P:
 *      export the buffer and signal words) into a descriptor;
 *   2. send every other rank the list of (tag, transport, size, descriptor) declared towards
 *      it -- an empty list too, so that a declaration with no counterpart is seen by both
 *      sides -- and receive theirs (bootstrap send/recv, bounded by the timeout);
 *   3. match the lists by tag; any declaration without a counterpart, or a counterpart with
 *      another transport, fails the setup on both ranks, naming the ranks and the tag, before
 *      anything of the peer is mapped;
 *   4. map the peer's side of each connection from its descriptor.
 */
#include "msc.h"
#include "util/cuda.h"
#include "util/err.h"
#include "util/size.h"

#include <stdlib.h>
#include <string.h>

/* One declaration as sent to the peer. */
struct conn_wire {
    int32_t tag;
    int32_t transport;
    uint64_t size;
    union {
        struct zn_msc_shm_desc shm;
        uint8_t p2p[ZN_MSC_P2P_DESC_BYTES];
        uint8_t net[ZN_MSC_NET_DESC_BYTES];
        uint8_t bytes[384];
    } desc;
};

/* Bootstrap tags of setup round r. */
#define CONN_TAG_COUNT(r) (0x6d730000u + 2u * (uint32_t)(r))
#define CONN_TAG_LIST(r)  (CONN_TAG_COUNT(r) + 1u)
/* The count a rank sends instead of its list when it could not prepare its side. */
#define CONN_FAILED UINT32_MAX

static const char *transport_name(mscclppTransport_t t)
{
    switch (t) {
    case mscclppTransportP2P: return "P2P";
    case mscclppTransportSHM: return "SHM";
    case mscclppTransportIB: return "IB";
    default: return "unknown";
    }
}

static ncclResult_t check_connect(struct mscclppComm *c, int remoteRank, int tag,
                                  mscclppTransport_t t)
{
    ZN_CHECK(zn_msc_comm_check(c, "mscclppConnect"));
    if (remoteRank < 0 || remoteRank >= c->nranks || remoteRank == c->rank)
        return zn_error(ncclInvalidArgument, ZN_INIT,
                        "mscclppConnect: remoteRank %d is not another rank of [0, %d) (this is %d)",
                        remoteRank, c->nranks, c->rank);
    if (t != mscclppTransportP2P && t != mscclppTransportSHM && t != mscclppTransportIB)
        return zn_error(ncclInvalidArgument, ZN_INIT,
                        "mscclppConnect to rank %d tag %d: unknown transport %d", remoteRank, tag,
                        (int)t);
    if (t == mscclppTransportP2P && c->cuda_dev < 0)
        return zn_error(ncclInvalidUsage, ZN_INIT,
                        "mscclppConnect to rank %d tag %d: transport P2P needs a GPU and this "
                        "process has none (use mscclppTransportSHM for host memory)",
                        remoteRank, tag);
    if (c->nconns >= c->cap)
        return zn_error(ncclInvalidUsage, ZN_INIT,
                        "mscclppConnect: more than %d connections (the trigger's connId limit)",
                        c->cap);
    for (int i = 0; i < c->nconns; i++)
        if (c->host[i].remote_rank == remoteRank && c->host[i].tag == tag)
            return zn_error(ncclInvalidUsage, ZN_INIT,
                            "mscclppConnect: a connection to rank %d with tag %d exists already",
                            remoteRank, tag);
    return ncclSuccess;
}

/* A P2P or IB buffer must lie in one allocation: device memory within its cudaMalloc
 * extent, host memory mapped throughout. The size is what the peer's puts are checked
 * against and what a net registers, so a size larger than the buffer would let puts land
 * past its end (SHM buffers are checked against their zincConnMemAlloc segment instead). */
static ncclResult_t check_extent(const struct zn_msc_conn *h, void *buf, uint64_t size)
{
    void *base;
    size_t alloc;
    if (zn_cuda_mem_range(buf, &base, &alloc) == 0) {
        uint64_t off = (uint64_t)((char *)buf - (char *)base);
        if (size > alloc - off)
            return zn_error(ncclInvalidArgument, ZN_INIT,
                            "connection to rank %d tag %d: buffer %p + %llu bytes runs past its "
                            "device allocation (%zu bytes at %p)",
                            h->remote_rank, h->tag, buf, (unsigned long long)size, alloc, base);
        return ncclSuccess;
    }
    if (size > SIZE_MAX || !zn_host_range_mapped(buf, (size_t)size))
        return zn_error(ncclInvalidArgument, ZN_INIT,
                        "connection to rank %d tag %d: buffer %p + %llu bytes is not memory of "
                        "this process (is the size larger than the buffer?)",
                        h->remote_rank, h->tag, buf, (unsigned long long)size);
    return ncclSuccess;
}

static ncclResult_t set_buffer(struct mscclppComm *c, int i, void *buf, uint64_t size)
{
    struct zn_msc_conn *h = &c->host[i];
    if (!buf || size == 0)
        return zn_error(ncclInvalidArgument, ZN_INIT,
                        "connection to rank %d tag %d: buffer %p of %llu bytes", h->remote_rank,
                        h->tag, buf, (unsigned long long)size);
    if (h->transport == mscclppTransportSHM)
        ZN_CHECK(zn_msc_shm_check_buffer(c, h->remote_rank, h->tag, buf, size, &h->local_buf));
    else
        ZN_CHECK(check_extent(h, buf, size));
    h->local_size = size;
    c->dev[i].localBuff = buf;
    /* An IB connection declared without its buffer makes its net side now. */
    if (h->transport == mscclppTransportIB && h->net) {
        ncclResult_t res = zn_msc_net_set_buffer(c, i);
        if (res != ncclSuccess) {
            c->dev[i].localBuff = NULL;
            return res;
        }
    }
    return ncclSuccess;
}

static ncclResult_t declare(struct mscclppComm *c, int remoteRank, int tag, void *buf,
                            uint64_t size, mscclppTransport_t t, const char *ib_dev)
{
    ZN_CHECK(check_connect(c, remoteRank, tag, t));
    int i = c->nconns;
    struct zn_msc_conn *h = &c->host[i];
    memset(h, 0, sizeof(*h));
    memset(&c->dev[i], 0, sizeof(c->dev[i]));
    h->comm = c;
    h->idx = i;
    h->remote_rank = remoteRank;
    h->tag = tag;
    h->transport = t;
    if (buf || size) ZN_CHECK(set_buffer(c, i, buf, size));
    if (t == mscclppTransportIB) ZN_CHECK(zn_msc_net_declare(c, i, ib_dev));
    c->dev[i].remoteRank = remoteRank;
    c->dev[i].tag = tag;
    c->dev[i].fifo.connId = i;
    c->dev[i].zincHostConn = h;
    c->nconns++;
    return ncclSuccess;
}

ZN_MSC_EXPORT mscclppResult_t mscclppConnect(mscclppComm_t comm, int remoteRank, int tag,
                                             void *localBuff, uint64_t buffSize,
                                             mscclppTransport_t transportType, const char *ibDev)
{
    if (!localBuff || buffSize == 0)
        return zn_msc_res(zn_error(ncclInvalidArgument, ZN_INIT,
                                   "mscclppConnect to rank %d tag %d: localBuff %p of %llu bytes",
                                   remoteRank, tag, localBuff, (unsigned long long)buffSize));
    return zn_msc_res(declare(comm, remoteRank, tag, localBuff, buffSize, transportType, ibDev));
}

ZN_MSC_EXPORT mscclppResult_t mscclppConnectWithoutBuffer(mscclppComm_t comm, int remoteRank,
                                                          int tag, mscclppTransport_t transportType,
                                                          const char *ibDev)
{
    return zn_msc_res(declare(comm, remoteRank, tag, NULL, 0, transportType, ibDev));
}

ZN_MSC_EXPORT mscclppResult_t mscclppRegisterBufferForConnection(mscclppComm_t comm, int connIdx,
                                                                 void *localBuff, uint64_t buffSize,
                                                                 mscclppBufferHandle_t *handle)
{
    ncclResult_t r = zn_msc_comm_check(comm, "mscclppRegisterBufferForConnection");
    if (r != ncclSuccess) return zn_msc_res(r);
    if (!handle || connIdx < comm->nsetup || connIdx >= comm->nconns)
        return zn_msc_res(zn_error(ncclInvalidArgument, ZN_INIT,
                                   "mscclppRegisterBufferForConnection: connIdx %d is not a "
                                   "connection awaiting setup (or comm/handle NULL)",
                                   connIdx));
    if (comm->dev[connIdx].localBuff)
        return zn_msc_res(zn_error(ncclInvalidUsage, ZN_INIT,
                                   "mscclppRegisterBufferForConnection: connection %d has its "
                                   "buffer already (zinc: one data buffer per connection)",
                                   connIdx));
    ncclResult_t res = set_buffer(comm, connIdx, localBuff, buffSize);
    if (res == ncclSuccess) *handle = 1;
    return zn_msc_res(res);
}

/* Step 1: every new connection's descriptor, in declaration order. */
static ncclResult_t prepare(struct mscclppComm *c, struct conn_wire *mine)
{
    int first = c->nsetup, n_shm = 0, npeers = 0;
    uint8_t *seen;
    ZN_CHECK(zn_calloc(&seen, (size_t)c->nranks, "peer set"));
    for (int i = first; i < c->nconns; i++) {
        struct zn_msc_conn *h = &c->host[i];
        if (!c->dev[i].localBuff) {
            free(seen);
            return zn_error(ncclInvalidUsage, ZN_INIT,
                            "mscclppConnectionSetup: connection %d to rank %d tag %d has no "
                            "buffer (mscclppRegisterBufferForConnection)",
                            i, h->remote_rank, h->tag);
        }
        if (h->transport != mscclppTransportSHM) continue;
        n_shm++;
        if (!seen[h->remote_rank]) npeers++;
        seen[h->remote_rank] = 1;
    }
    free(seen);
    struct zn_msc_shm_desc *shm;
    ZN_CHECK(zn_calloc(&shm, (size_t)(c->nconns - first) + 1, "descriptors"));
    ncclResult_t res = n_shm ? zn_msc_shm_prepare(c, first, n_shm, npeers, shm) : ncclSuccess;
    for (int i = first; i < c->nconns && res == ncclSuccess; i++) {
        struct conn_wire *w = &mine[i - first];
        w->tag = c->host[i].tag;
        w->transport = (int32_t)c->host[i].transport;
        w->size = c->host[i].local_size;
        if (c->host[i].transport == mscclppTransportSHM)
            w->desc.shm = shm[i - first];
        else if (c->host[i].transport == mscclppTransportIB)
            res = zn_msc_net_prepare(c, i, w->desc.net);
        else
            res = zn_msc_p2p_prepare(c, i, w->desc.p2p);
    }
    free(shm);
    return res;
}

/* Step 2 for one peer: send it our list (count, then entries), and return its list. */
static ncclResult_t swap_lists(struct mscclppComm *c, int peer, const struct conn_wire *mine,
                               int nmine, struct conn_wire **theirs, uint32_t *ntheirs)
{
    int first = c->nsetup;
    uint32_t n = 0;
    struct conn_wire *out;
    ZN_CHECK(zn_calloc(&out, (size_t)nmine + 1, "descriptors"));
    for (int i = 0; i < nmine; i++)
        if (c->host[first + i].remote_rank == peer) out[n++] = mine[i];
    ncclResult_t res;
    uint32_t r = (uint32_t)c->nrounds;
    ZN_CHECK_GOTO(zn_boot_send(c->boot, peer, CONN_TAG_COUNT(r), &n, sizeof(n)), res, out_free);
    if (n)
        ZN_CHECK_GOTO(zn_boot_send(c->boot, peer, CONN_TAG_LIST(r), out, n * sizeof(*out)), res,
                      out_free);
    ZN_CHECK_GOTO(zn_boot_recv(c->boot, peer, CONN_TAG_COUNT(r), ntheirs, sizeof(*ntheirs)), res,
                  out_free);
    if (*ntheirs == CONN_FAILED) {
        res = zn_error(ncclRemoteError, ZN_INIT,
                       "mscclppConnectionSetup: rank %d failed to prepare its side of the "
                       "connections (its log says why)",
                       peer);
        goto out_free;
    }
    if (*ntheirs > ZN_MSC_MAX_CONNS) {
        res = zn_error(ncclRemoteError, ZN_INIT, "connection setup: rank %d sent %u declarations",
                       peer, *ntheirs);
        goto out_free;
    }
    ZN_CHECK_GOTO(zn_calloc(theirs, (size_t)*ntheirs + 1, "descriptors"), res, out_free);
    if (*ntheirs)
        res = zn_boot_recv(c->boot, peer, CONN_TAG_LIST(r), *theirs, *ntheirs * sizeof(**theirs));
    if (res != ncclSuccess) {
        free(*theirs);
        *theirs = NULL;
    }
out_free:
    free(out);
    return res;
}

/* Step 2 when this rank could not prepare its side: tell every peer at once (a count of
 * CONN_FAILED), so that they fail now, naming this rank, rather than at the deadline. */
static void tell_failed(struct mscclppComm *c)
{
    uint32_t n = CONN_FAILED;
    for (int p = 0; p < c->nranks; p++)
        if (p != c->rank) (void)zn_boot_send(c->boot, p, CONN_TAG_COUNT(c->nrounds), &n, sizeof(n));
}

/* Step 3 for one peer: every declaration on either side has its counterpart. match[k] is the
 * entry of theirs that our k-th new connection to this peer pairs with. */
static ncclResult_t match_lists(struct mscclppComm *c, int peer, const struct conn_wire *theirs,
                                uint32_t ntheirs, int *match)
{
    for (uint32_t j = 0; j < ntheirs; j++) {
        int found = 0;
        for (int i = c->nsetup; i < c->nconns; i++)
            if (c->host[i].remote_rank == peer && c->host[i].tag == theirs[j].tag) found = 1;
        if (!found)
            return zn_error(ncclInvalidUsage, ZN_INIT,
                            "mscclppConnectionSetup: rank %d declared a connection to rank %d "
                            "with tag %d, and rank %d declared none to it with that tag",
                            peer, c->rank, theirs[j].tag, c->rank);
    }
    for (int i = c->nsetup; i < c->nconns; i++) {
        struct zn_msc_conn *h = &c->host[i];
        if (h->remote_rank != peer) continue;
        match[i - c->nsetup] = -1;
        for (uint32_t j = 0; j < ntheirs; j++)
            if (theirs[j].tag == h->tag) match[i - c->nsetup] = (int)j;
        int j = match[i - c->nsetup];
        if (j < 0)
            return zn_error(ncclInvalidUsage, ZN_INIT,
                            "mscclppConnectionSetup: rank %d declared a connection to rank %d "
                            "with tag %d, and rank %d declared none to it with that tag",
                            c->rank, peer, h->tag, peer);
        if (theirs[j].transport != (int32_t)h->transport)
            return zn_error(ncclInvalidUsage, ZN_INIT,
                            "mscclppConnectionSetup: connection between ranks %d and %d tag %d: "
                            "transport %s here, %s on rank %d",
                            c->rank, peer, h->tag, transport_name(h->transport),
                            transport_name((mscclppTransport_t)theirs[j].transport), peer);
    }
    return ncclSuccess;
}

/* Step 4 for one peer. */
static ncclResult_t attach_peer(struct mscclppComm *c, int peer, const struct conn_wire *theirs,
                                const int *match)
{
    for (int i = c->nsetup; i < c->nconns; i++) {
        struct zn_msc_conn *h = &c->host[i];
        if (h->remote_rank != peer) continue;
        const struct conn_wire *w = &theirs[match[i - c->nsetup]];
        h->remote_size = w->size;
        if (h->transport == mscclppTransportSHM)
            ZN_CHECK(zn_msc_shm_attach(c, i, &w->desc.shm));
        else if (h->transport == mscclppTransportIB)
            ZN_CHECK(zn_msc_net_attach(c, i, w->desc.net));
        else
            ZN_CHECK(zn_msc_p2p_attach(c, i, w->desc.p2p));
        h->ready = 1;
    }
    return ncclSuccess;
}

static ncclResult_t setup(struct mscclppComm *c)
{
    int nnew = c->nconns - c->nsetup;
    struct conn_wire *mine, **theirs = NULL;
    uint32_t *ntheirs = NULL;
    int *match = NULL;
    ncclResult_t res;
    ZN_CHECK(zn_calloc(&mine, (size_t)nnew + 1, "descriptors"));
    ZN_CHECK_GOTO(zn_calloc(&theirs, (size_t)c->nranks, "descriptors"), res, out);
    ZN_CHECK_GOTO(zn_calloc(&ntheirs, (size_t)c->nranks, "descriptors"), res, out);
    ZN_CHECK_GOTO(zn_calloc(&match, (size_t)nnew + 1, "descriptors"), res, out);
    res = prepare(c, mine);
    if (res != ncclSuccess) {
        tell_failed(c);
        goto out;
    }
    for (int p = 0; p < c->nranks; p++)
        if (p != c->rank)
            ZN_CHECK_GOTO(swap_lists(c, p, mine, nnew, &theirs[p], &ntheirs[p]), res, out);
    /* Match every peer's list before mapping anything, so that a mismatch leaves nothing of
     * a peer mapped and fails both sides of it the same way. */
    for (int p = 0; p < c->nranks; p++)
        if (p != c->rank) ZN_CHECK_GOTO(match_lists(c, p, theirs[p], ntheirs[p], match), res, out);
    for (int p = 0; p < c->nranks; p++)
        if (p != c->rank) ZN_CHECK_GOTO(attach_peer(c, p, theirs[p], match), res, out);
    ZN_CHECK_GOTO(zn_msc_net_establish(c), res, out);
    c->nsetup = c->nconns;
out:
    c->nrounds++;
    for (int p = 0; theirs && p < c->nranks; p++) free(theirs[p]);
    free(theirs);
    free(ntheirs);
    free(match);
    free(mine);
    return res;
}

ZN_MSC_EXPORT mscclppResult_t mscclppConnectionSetup(mscclppComm_t comm)
{
    ncclResult_t r = zn_msc_comm_check(comm, "mscclppConnectionSetup");
    if (r != ncclSuccess) return zn_msc_res(r);
    return zn_msc_res(setup(comm));
}

ZN_MSC_EXPORT mscclppResult_t mscclppGetAllDeviceConnections(mscclppComm_t comm,
                                                             mscclppDevConn_t **devConns,
                                                             int *nConns)
{
    ncclResult_t r = zn_msc_comm_check(comm, "mscclppGetAllDeviceConnections");
    if (r != ncclSuccess) return zn_msc_res(r);
    if (!devConns || !nConns)
        return zn_msc_res(zn_error(ncclInvalidArgument, ZN_INIT,
                                   "mscclppGetAllDeviceConnections: an argument is NULL"));
    *devConns = comm->dev;
    *nConns = comm->nsetup;
    return mscclppSuccess;
}

ZN_MSC_EXPORT mscclppResult_t mscclppGetDeviceConnection(mscclppComm_t comm, int remoteRank,
                                                         int tag, mscclppDevConn_t **devConn)
{
    ncclResult_t r = zn_msc_comm_check(comm, "mscclppGetDeviceConnection");
    if (r != ncclSuccess) return zn_msc_res(r);
    if (!devConn)
        return zn_msc_res(
            zn_error(ncclInvalidArgument, ZN_INIT, "mscclppGetDeviceConnection: devConn is NULL"));
    for (int i = 0; i < comm->nsetup; i++)
        if (comm->host[i].remote_rank == remoteRank && comm->host[i].tag == tag) {
            *devConn = &comm->dev[i];
            return mscclppSuccess;
        }
    return zn_msc_res(zn_error(ncclInvalidArgument, ZN_INIT,
                               "mscclppGetDeviceConnection: no connection to rank %d with tag %d "
                               "has been set up",
                               remoteRank, tag));
}
