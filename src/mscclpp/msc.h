/*
 * libmscclpp's internals: MSCCL++ 0.1's one-sided connection API on zinc's bootstrap, shared
 * memory and p2p layers. This folder is a layer of its own above api (tests/unit/layering.sh);
 * it is linked into libmscclpp.so only, never into libnccl.
 *
 *   comm.c      communicator lifecycle, bootstrap collectives, errors, logging
 *   conn.c      mscclppConnect / mscclppConnectionSetup: declarations matched with the peers'
 *   shm_conn.c  mscclppTransportSHM on the shm transport's one-sided table (zn_shm_rma):
 *               zincConnMemAlloc, host put/signal/wait/flush
 *   p2p_conn.c  mscclppTransportP2P on the p2p transport's one-sided table (zn_p2p_rma):
 *               signal words, device-connection fields, the FIFO
 *   ib_conn.c  mscclppTransportIB on the net transport's one-sided table
 *               (zn_transport_net_rma): signal words, epochs, host waits, FIFO triggers
 *   proxy.c     the FIFO consumer (handles one trigger per call), a client of the process's
 *               progress thread
 *   regmem.cc   mscclppRegisterBuffer (C++: mscclppRegisteredMemory holds a std::vector)
 */
#ifndef ZN_MSCCLPP_MSC_H
#define ZN_MSCCLPP_MSC_H

#include "mscclpp.h"
#include "transport/peer.h"
#include "transport/transport.h"
#include "util/shm.h"

#include <pthread.h>
#include <stdatomic.h>

#define ZN_MSC_EXPORT __attribute__((visibility("default")))

/* Most connections one communicator may have: the trigger's connId has 10 bits. */
#define ZN_MSC_MAX_CONNS (1 << MSCCLPP_BITS_CONNID)

/* Bytes of one connection's signal slot in a signal segment (one cache line):
 *   0   mscclppDevConnSignalEpochId { device, proxy }
 *   16  waitEpochId
 *   24  unused */
#define ZN_MSC_SIGNAL_SLOT 64

/* A zincConnMemAlloc buffer: a region of the shm one-sided domain. */
struct zn_msc_buf {
    void *ptr;
    size_t size;
    void *region; /* zn_shm_rma's handle */
    struct zn_msc_buf *next;
};

/* The host side of one connection. */
struct zn_msc_conn {
    struct mscclppComm *comm;
    int idx; /* in declaration order: the trigger's connId */
    int remote_rank, tag;
    mscclppTransport_t transport;
    uint64_t local_size, remote_size;
    int ready; /* set up by mscclppConnectionSetup */
    /* SHM: the zincConnMemAlloc buffer holding localBuff (NULL: any other host memory, which
     * the peer reaches by cross-memory attach); the one-sided connection (zn_shm_rma's), the
     * regions of localBuff and of the peer's buffer and signal slot. */
    const struct zn_msc_buf *local_buf;
    struct zn_conn *ep;
    void *lreg, *rbuf, *rsig;
    uint64_t rsig_off;
    /* P2P: the signal count the proxy stored last into the peer's `proxy` word (the next one
     * is rebuilt from the low bits the trigger carries, mscclppfifo.h). */
    uint64_t signaled;
    /* IB: ib_conn.c's state (signal words, epochs); the connection is ep. */
    void *net;
};

/* A peer's buffer registered with mscclppRegisterBuffer, as mapped here. */
struct zn_msc_reg {
    void *remote;
    uint64_t size;
    int conn;
    struct zn_msc_reg *next;
};

#define ZN_MSC_COMM_MAGIC 0x7a6e6d7363636f6dull /* "znmsccom" */

struct mscclppComm {
    uint64_t magic; /* ZN_MSC_COMM_MAGIC while alive; zeroed (and the memory kept) by destroy */
    int rank, nranks;
    struct zn_boot *boot;
    struct zn_peer_info *peers;
    struct zn_tctx tctx;
    struct zn_peer_watch *watch;
    atomic_int abort_flag;
    int cuda_dev; /* -1 without a GPU */

    /* Connections in declaration order; dev[i] is what kernels get, host[i] the rest. */
    int nconns, cap;
    int nsetup; /* connections set up so far (earlier rounds) */
    mscclppDevConn_t *dev;
    struct zn_msc_conn *host;

    /* Shared memory: the shm one-sided domain (zn_shm_rma; NULL until first used), which maps
     * the peers' buffers and signal segments, and this rank's zincConnMemAlloc buffers. */
    void *shm_dom;
    struct zn_msc_buf *own_bufs;
    int nrounds;

    void *p2p;   /* p2p_conn.c's per-communicator state, NULL until a P2P connection */
    void *proxy; /* proxy.c's state while launched */
    /* The FIFO as the proxy sees it (host addresses of mapped host memory), and the words
     * that make device waits give up and record why; NULL until a P2P connection. */
    mscclppTrigger *fifo_host;
    uint64_t *tail_host;
    uint32_t *abort_word, *error_word;

    /* Buffers registered by mscclppRegisterBuffer: the peers' ones mapped here, with sizes. */
    struct zn_msc_reg *regs;
    int nregs;

    /* The net one-sided domain of the IB connections (zn_transport_net_rma; NULL until the
     * first), which serialises progress over them (proxy and host threads). */
    void *net_dom;
};

/* Convert to the MSCCL++ type: the values are the same as ncclResult_t's. */
static inline mscclppResult_t zn_msc_res(ncclResult_t r)
{
    return (mscclppResult_t)r;
}

/* comm.c: check a handle passed by the user (NULL, destroyed, not a communicator). */
ncclResult_t zn_msc_comm_check(const struct mscclppComm *c, const char *fn);

/* conn.c */
ncclResult_t zn_msc_conn_find(struct mscclppComm *c, const mscclppDevConn_t *dev,
                              struct zn_msc_conn **out);

/* shm_conn.c: the descriptor one side of an SHM connection sends its peer at setup: the keys
 * (zn_shm_rma's) of its buffer and of the round's signal segment, and where its slot lies in
 * that segment. */
struct zn_msc_shm_desc {
    struct zn_rma_key buf, sig;
    uint64_t sig_off;
};
/* Make this rank's signal segment of the round (n_shm SHM connections, npeers distinct
 * peers among them) and fill each new SHM connection's descriptor. */
ncclResult_t zn_msc_shm_prepare(struct mscclppComm *c, int first, int n_shm, int npeers,
                                struct zn_msc_shm_desc *descs);
/* Map the peer's side of connection i from its descriptor. */
ncclResult_t zn_msc_shm_attach(struct mscclppComm *c, int i, const struct zn_msc_shm_desc *peer);
/* Where localBuff of buffSize bytes lies: in a zincConnMemAlloc buffer of this rank (*in)
 * or, *in NULL, in other memory of this process; refused if neither or if it runs past the
 * end of its zincConnMemAlloc buffer. */
ncclResult_t zn_msc_shm_check_buffer(struct mscclppComm *c, int remote_rank, int tag, void *buf,
                                     uint64_t size, const struct zn_msc_buf **in);
void zn_msc_shm_free_all(struct mscclppComm *c);
/* mscclppRegisterBuffer on SHM: describe a zincConnMemAlloc range (buf_* fields of the
 * descriptor), and map a peer's range. */
ncclResult_t zn_msc_shm_buf_desc(struct mscclppComm *c, void *buf, uint64_t size,
                                 struct zn_msc_shm_desc *d);
ncclResult_t zn_msc_shm_buf_open(struct mscclppComm *c, int peer, const struct zn_msc_shm_desc *d,
                                 uint64_t size, void **ptr);

/* p2p_conn.c: the same for P2P connections (opaque bytes; ZN_MSC_P2P_DESC_BYTES long). */
#define ZN_MSC_P2P_DESC_BYTES (2 * sizeof(struct zn_rma_key) + 8)
ncclResult_t zn_msc_p2p_prepare(struct mscclppComm *c, int i, void *desc);
ncclResult_t zn_msc_p2p_attach(struct mscclppComm *c, int i, const void *peer_desc);

/* Point connection i's FIFO fields at the communicator's FIFO (made on first use). */
ncclResult_t zn_msc_p2p_fifo(struct mscclppComm *c, int i);
/* Copy a FIFO data trigger of connection i (asynchronous, on the domain's stream). */
ncclResult_t zn_msc_p2p_copy(struct mscclppComm *c, int i, uint64_t dst_off, uint64_t src_off,
                             uint64_t size);
/* Signal: store the count whose low ZINC_SIGNAL_BITS bits the trigger carries (low) into the
 * peer's proxy word, stream-ordered after the copies before it. */
ncclResult_t zn_msc_p2p_signal(struct mscclppComm *c, int i, uint64_t low);
/* The count a signalling trigger names, from the low ZINC_SIGNAL_BITS bits it carries and the
 * count signalled last on its connection: the next count with those low bits (a jump of more
 * than one is signalDirect stores in between). 0 for a trigger without a count: zero bits
 * where the next count's are not (a kernel built against MSCCL++ 0.1's header). */
static inline uint64_t zn_msc_signal_count(uint64_t last, uint64_t low)
{
    const uint64_t mask = (1ull << ZINC_SIGNAL_BITS) - 1;
    if (low == 0 && ((last + 1) & mask) != 0) return 0;
    uint64_t v = last + ((low - last) & mask);
    return v == last ? v + mask + 1 : v;
}
/* Wait until every copy issued so far (on any P2P connection) is done. */
ncclResult_t zn_msc_p2p_sync(struct mscclppComm *c, int i);
/* Copy size bytes from src (device or host memory) to dst, a peer's mapped buffer, on stream. */
ncclResult_t zn_msc_p2p_write(void *dst, const void *src, uint64_t size, void *stream);
/* Share a device buffer with the peer of connection i (mscclppRegisterBuffer): its descriptor,
 * and the peer's buffer mapped from the peer's descriptor. */
ncclResult_t zn_msc_p2p_buf_desc(struct mscclppComm *c, void *buf, uint64_t size, void *desc);
ncclResult_t zn_msc_p2p_buf_open(struct mscclppComm *c, int peer, const void *desc, uint64_t size,
                                 void **ptr);
void zn_msc_p2p_free_all(struct mscclppComm *c);

/* ib_conn.c: mscclppTransportIB over zinc's nets. The descriptor is the table's (a key). */
#define ZN_MSC_NET_DESC_BYTES sizeof(struct zn_rma_key)
ncclResult_t zn_msc_net_declare(struct mscclppComm *c, int i, const char *ib_dev);
/* The buffer of IB connection i was given after its declaration. */
ncclResult_t zn_msc_net_set_buffer(struct mscclppComm *c, int i);
ncclResult_t zn_msc_net_prepare(struct mscclppComm *c, int i, void *desc);
ncclResult_t zn_msc_net_attach(struct mscclppComm *c, int i, const void *peer_desc);
/* Connect and accept every net connection of the round, in whatever order the peers do. */
ncclResult_t zn_msc_net_establish(struct mscclppComm *c);
/* Move every IB connection's sends and receives on (never blocks: a thread that finds another
 * doing it leaves it that). A connection that fails keeps its error (reported by the calls on
 * it, and by zn_msc_net_error). */
void zn_msc_net_progress(struct mscclppComm *c);
ncclResult_t zn_msc_net_error(struct mscclppComm *c);
/* Whether h is an IB connection whose peer closed its side (exited or destroyed its comm). */
int zn_msc_net_closed(struct zn_msc_conn *h);
/* Host operations (zincConn*): kind is 1 data, 2 signal or both; ranges checked by the caller. */
ncclResult_t zn_msc_net_enqueue(struct zn_msc_conn *h, uint32_t kind, uint64_t dst_off,
                                uint64_t src_off, uint64_t size, const char *fn);
ncclResult_t zn_msc_net_wait(struct zn_msc_conn *h);
/* Refuse a host put on a connection whose buffer is GPU memory (the net sends a mirror that
 * only the proxy fills). */
ncclResult_t zn_msc_net_host_put(struct zn_msc_conn *h, const char *fn);
/* A FIFO trigger (mscclppfifo.h type bits) of IB connection i with a GPU buffer, from the proxy:
 * blocks until the data is staged and queued (and, for a flush, sent). */
ncclResult_t zn_msc_net_trigger(struct mscclppComm *c, int i, uint64_t type, uint64_t dst_off,
                                uint64_t src_off, uint64_t size);
ncclResult_t zn_msc_net_flush(struct zn_msc_conn *h);
void zn_msc_net_free(struct zn_msc_conn *h);
/* Close the net domain (after every connection's zn_msc_net_free). */
void zn_msc_net_fini(struct mscclppComm *c);

/* regmem.c (regmem.cc declares the first two with int results: the same values and ABI). */
ncclResult_t zn_msc_register(struct mscclppComm *c, void *mem, uint64_t size, void **remote);
ncclResult_t zn_msc_reg_write(struct mscclppComm *c, void *remote, const void *src, uint64_t size,
                              uint64_t dst_off, void *stream);
void zn_msc_reg_free_all(struct mscclppComm *c);
int zn_msc_nconns(struct mscclppComm *c);
int zn_msc_arg_error(const char *msg);

/* proxy.c: handle at most one FIFO trigger of c (never blocks but for a flush's stream sync);
 * what the process's progress thread calls for c. */
ncclResult_t zn_msc_proxy_progress(struct mscclppComm *c, int *progressed);
void zn_msc_proxy_free(struct mscclppComm *c);

#endif
