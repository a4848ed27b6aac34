/*
 * mscclppRegisterBuffer's work: share one more buffer with the peer of every connection, and
 * mscclppRegisteredBufferWrite's copies into the peers' registered buffers. The C++ entry
 * points (mscclppRegisteredMemory holds a std::vector) are in regmem.cc.
 */
#include "msc.h"
#include "util/err.h"

#include <stdlib.h>
#include <string.h>

struct reg_wire {
    int32_t tag;
    int32_t pad;
    uint64_t size;
    union {
        struct zn_msc_shm_desc shm;
        uint8_t p2p[ZN_MSC_P2P_DESC_BYTES];
        uint8_t bytes[256];
    } desc;
};

#define REG_TAG(r) (0x6d720000u + (uint32_t)(r))

/* Every connection to peer, in declaration order: send our descriptors, map theirs. */
static ncclResult_t reg_peer(struct mscclppComm *c, int peer, const struct reg_wire *mine,
                             void **remote)
{
    int n = 0;
    for (int i = 0; i < c->nsetup; i++) n += c->host[i].remote_rank == peer;
    struct reg_wire *out, *in;
    ZN_CHECK(zn_calloc(&out, (size_t)n, "descriptors"));
    ncclResult_t res;
    ZN_CHECK_GOTO(zn_calloc(&in, (size_t)n, "descriptors"), res, free_out);
    int k = 0;
    for (int i = 0; i < c->nsetup; i++)
        if (c->host[i].remote_rank == peer) out[k++] = mine[i];
    uint32_t tag = REG_TAG(c->nregs);
    ZN_CHECK_GOTO(zn_boot_send(c->boot, peer, tag, out, (size_t)n * sizeof(*out)), res, free_in);
    ZN_CHECK_GOTO(zn_boot_recv(c->boot, peer, tag, in, (size_t)n * sizeof(*in)), res, free_in);
    for (int i = 0; i < c->nsetup; i++) {
        struct zn_msc_conn *h = &c->host[i];
        if (h->remote_rank != peer) continue;
        const struct reg_wire *w = NULL;
        for (int j = 0; j < n; j++)
            if (in[j].tag == h->tag) w = &in[j];
        if (!w) {
            res =
                zn_error(ncclRemoteError, ZN_INIT,
                         "mscclppRegisterBuffer: rank %d sent no buffer for tag %d", peer, h->tag);
            goto free_in;
        }
        if (h->transport == mscclppTransportSHM)
            res = zn_msc_shm_buf_open(c, peer, &w->desc.shm, w->size, &remote[i]);
        else
            res = zn_msc_p2p_buf_open(c, peer, w->desc.p2p, w->size, &remote[i]);
        if (res != ncclSuccess) goto free_in;
        struct zn_msc_reg *r;
        ZN_CHECK_GOTO(zn_calloc(&r, 1, "registration"), res, free_in);
        *r =
            (struct zn_msc_reg){ .remote = remote[i], .size = w->size, .conn = i, .next = c->regs };
        c->regs = r;
    }
free_in:
    free(in);
free_out:
    free(out);
    return res;
}

/* remote[i] receives the buffer connection i's peer registered. Collective over the peers of
 * every set-up connection. */
ncclResult_t zn_msc_register(struct mscclppComm *c, void *mem, uint64_t size, void **remote)
{
    ZN_CHECK(zn_msc_comm_check(c, "mscclppRegisterBuffer"));
    struct reg_wire *mine;
    ZN_CHECK(zn_calloc(&mine, (size_t)c->nsetup + 1, "descriptors"));
    ncclResult_t res = ncclSuccess;
    for (int i = 0; i < c->nsetup && res == ncclSuccess; i++) {
        mine[i].tag = c->host[i].tag;
        mine[i].size = size;
        if (c->host[i].transport == mscclppTransportSHM)
            res = zn_msc_shm_buf_desc(c, mem, size, &mine[i].desc.shm);
        else
            res = zn_msc_p2p_buf_desc(c, mem, size, mine[i].desc.p2p);
    }
    for (int p = 0; p < c->nranks && res == ncclSuccess; p++) {
        int any = 0;
        for (int i = 0; i < c->nsetup; i++) any |= c->host[i].remote_rank == p;
        if (any && p != c->rank) res = reg_peer(c, p, mine, remote);
    }
    c->nregs++;
    free(mine);
    return res;
}

/* One copy of mscclppRegisteredBufferWrite, bounds-checked against what the peer registered. */
ncclResult_t zn_msc_reg_write(struct mscclppComm *c, void *remote, const void *src, uint64_t size,
                              uint64_t dst_off, void *stream)
{
    ZN_CHECK(zn_msc_comm_check(c, "mscclppRegisteredBufferWrite"));
    const struct zn_msc_reg *r = c->regs;
    while (r && r->remote != remote) r = r->next;
    if (!r)
        return zn_error(ncclInvalidArgument, ZN_INIT,
                        "mscclppRegisteredBufferWrite: %p is not a buffer mapped by "
                        "mscclppRegisterBuffer on this communicator",
                        remote);
    const struct zn_msc_conn *h = &c->host[r->conn];
    if (dst_off > r->size || size > r->size - dst_off)
        return zn_error(ncclInvalidArgument, ZN_INIT,
                        "mscclppRegisteredBufferWrite to rank %d: [%llu, +%llu) is outside the "
                        "%llu bytes it registered",
                        h->remote_rank, (unsigned long long)dst_off, (unsigned long long)size,
                        (unsigned long long)r->size);
    if (h->transport == mscclppTransportSHM) {
        memcpy((char *)remote + dst_off, src, size);
        return ncclSuccess;
    }
    return zn_msc_p2p_write((char *)remote + dst_off, src, size, stream);
}

void zn_msc_reg_free_all(struct mscclppComm *c)
{
    while (c->regs) {
        struct zn_msc_reg *r = c->regs;
        c->regs = r->next;
        free(r);
    }
}

/* For regmem.cc, which cannot include msc.h. */
int zn_msc_nconns(struct mscclppComm *c)
{
    /* A bad handle: none, and zn_msc_register then says what is wrong with it. */
    return c && c->magic == ZN_MSC_COMM_MAGIC ? c->nsetup : 0;
}

int zn_msc_arg_error(const char *msg)
{
    return (int)zn_error(ncclInvalidArgument, ZN_INIT, "%s", msg);
}
