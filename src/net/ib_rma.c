/*
 * IB net: the one-sided extension (net_layer.h, struct zn_net_rma_ops), zinc-internal and not part
 * of the ncclNet_t table. A receiver describes memory it registered on its recv comm as a key
 * (address, size, rkey) and hands it to the sender by whatever means the caller has; the
 * sender's RDMA writes then land in that memory with nothing posted, polled or tested on the
 * receiving side: its NIC places the data.
 *
 * Bounds. A registration covers whole pages and is shared through the cache (ib_data.c), so
 * the rkey admits more than the range the key names; the key's size is the limit, checked
 * here before anything is posted. A write outside it is refused, not clipped.
 *
 * Ordering. Every one-sided write of a send comm goes out on its first queue pair, whatever
 * ZINC_IB_QPS_PER_CONNECTION says: an RC queue pair places its writes in order, so a write of
 * a flag posted after a write of data is seen only after the data (spreading writes over the
 * QPs would let the flag overtake the data). Only the last work request of a write is
 * signaled; its completion, reaped by test(), means the whole write reached the peer.
 */
#include "net/ib.h"
#include "net/net_layer.h"
#include "util/err.h"

#include <string.h>

/* One work request moves at most this much (ibv_sge.length is 32 bits); larger writes are
 * chained, up to MAX_CHUNKS of them. */
#define CHUNK      (1ull << 30)
#define MAX_CHUNKS 16

static ncclResult_t rma_key(void *comm, void *mhandle, void *data, size_t size,
                            struct zn_net_rkey *out)
{
    struct zn_ib_comm *c = comm;
    struct zn_ib_mr *m = mhandle;
    uintptr_t a = (uintptr_t)data;
    if (!m || (m->end && (a < m->start || a > m->end || size > m->end - a)))
        return zn_error(ncclInvalidArgument, ZN_NET, "NET/IB: key of %zu bytes at %p: %s", size,
                        data, m ? "outside the registration it names" : "no registration");
    (void)c;
    memset(out, 0, sizeof(*out));
    out->addr = a;
    out->size = size;
    out->rkey = m->mr->rkey;
    return ncclSuccess;
}

static ncclResult_t rma_refuse(struct zn_ib_comm *c, size_t size, uint64_t dst_off,
                               const struct zn_net_rkey *dst, const char *why)
{
    return zn_error(ncclInvalidArgument, ZN_NET,
                    "NET/IB: %s:%d: one-sided write of %zu bytes at offset %llu to %s: %s (the "
                    "peer registered %llu bytes): refused, nothing written",
                    c->dev->name, c->dev->port, size, (unsigned long long)dst_off, c->peer, why,
                    (unsigned long long)dst->size);
}

/* Check both ranges; the source must lie in the registration mhandle names. */
static ncclResult_t rma_check_ranges(struct zn_ib_comm *c, struct zn_ib_mr *m, void *src,
                                     size_t size, const struct zn_net_rkey *dst, uint64_t dst_off)
{
    if (!c->is_send) return rma_refuse(c, size, dst_off, dst, "not a send comm");
    if (dst_off > dst->size || size > dst->size - dst_off)
        return rma_refuse(c, size, dst_off, dst, "outside the peer's registered range");
    if (size > CHUNK * MAX_CHUNKS) return rma_refuse(c, size, dst_off, dst, "larger than 16 GiB");
    uintptr_t a = (uintptr_t)src;
    if (size && (!m || (m->end && (a < m->start || a > m->end || size > m->end - a))))
        return rma_refuse(c, size, dst_off, dst, "the source lies outside its registration");
    return ncclSuccess;
}

static ncclResult_t rma_write(void *send_comm, void *mhandle, void *src, size_t size,
                              const struct zn_net_rkey *dst, uint64_t dst_off, void **request)
{
    struct zn_ib_comm *c = send_comm;
    struct zn_ib_mr *m = mhandle;
    *request = NULL;
    ZN_CHECK(zn_net_ib_comm_check(c));
    ZN_CHECK(rma_check_ranges(c, m, src, size, dst, dst_off));
    if (c->hs) ZN_CHECK(zn_net_ib_conn_progress(c));
    if (c->hs) return ncclSuccess; /* the QPs are not up yet: try again */
    struct zn_ib_req *r = zn_net_ib_req_alloc(c, ZN_IB_REQ_RMA);
    if (!r) return ncclSuccess; /* every request in flight: try again */
    struct ibv_sge sge[MAX_CHUNKS];
    struct ibv_send_wr wr[MAX_CHUNKS];
    int n = size ? (int)((size + CHUNK - 1) / CHUNK) : 1;
    memset(wr, 0, sizeof(wr[0]) * (size_t)n);
    for (int i = 0; i < n; i++) {
        uint64_t off = (uint64_t)i * CHUNK, len = size - off < CHUNK ? size - off : CHUNK;
        sge[i] = (struct ibv_sge){ (uintptr_t)src + off, (uint32_t)len, size ? m->mr->lkey : 0 };
        wr[i].sg_list = &sge[i];
        wr[i].num_sge = size ? 1 : 0;
        wr[i].opcode = IBV_WR_RDMA_WRITE;
        wr[i].wr.rdma.remote_addr = dst->addr + dst_off + off;
        wr[i].wr.rdma.rkey = dst->rkey;
        wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
    }
    wr[n - 1].send_flags = IBV_SEND_SIGNALED;
    wr[n - 1].wr_id = ZN_IB_WRID(ZN_IB_WR_RMA, r - c->reqs);
    r->n = 1;
    r->sizes[0] = size;
    ncclResult_t res = zn_net_ib_post(c, c->qps[0], wr);
    if (res != ncclSuccess) {
        r->type = ZN_IB_REQ_FREE;
        return c->failed = res;
    }
    *request = r;
    return ncclSuccess;
}

static ncclResult_t rma_check(void *comm, int *closed)
{
    struct zn_ib_comm *c = comm;
    ZN_CHECK(zn_net_ib_comm_check(c));
    if (zn_net_ib_hung_up(c)) *closed = 1;
    return ncclSuccess;
}

const struct zn_net_rma_ops zn_net_ib_rma = {
    .key = rma_key,
    .write = rma_write,
    .check = rma_check,
};
