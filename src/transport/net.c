/*
 * The net transport: transport connections between ranks over a net of the net layer
 * (src/net: zinc's socket net, the IB verbs net, or a plugin's). It is the one data path
 * between hosts; "socket" names it over the socket net. This file holds the ops table,
 * per-communicator init / fini / abort and the shared listener; net_data.c moves the bytes
 * (net_internal.h says what lives where).
 *
 * Each rank opens one listen comm at init and allgathers its handle with the net's name;
 * every connection of the communicator arrives on it and names itself with a HELLO. Rejected
 * design: a listen comm per (peer, channel), which costs n^2 handles in the allgather and a
 * listener per connection.
 */
#include "net.h"
#include "net_internal.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/param.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* While every connection is set up, the listener is only looked at this often (strays);
 * an accept per progress call would cost a system call on the data path. */
#define NT_IDLE_ACCEPT_NS (10 * 1000 * 1000)
#define NT_MAX_PENDING    1024

const char *zn_nt_channel_name(int channel)
{
    switch (channel) {
    case ZN_CH_COLL: return "collective";
    case ZN_CH_P2P: return "point-to-point";
    default: return "unknown";
    }
}

ncclResult_t zn_nt_fail(struct nt_conn *c, ncclResult_t code, const char *fmt, ...)
{
    /* The first error is the cause; anything after it is a consequence. */
    if (c->err != ncclSuccess) return zn_nt_sticky(c);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->errmsg, sizeof(c->errmsg), fmt, ap);
    va_end(ap);
    c->err = code;
    zn_nt_setup_over(c);
    return zn_error(code, ZN_NET, "%s", c->errmsg);
}

ncclResult_t zn_nt_sticky(struct nt_conn *c)
{
    zn_set_last_error(c->errmsg);
    return c->err;
}

void zn_nt_setup_over(struct nt_conn *c)
{
    if (c->setup_over) return;
    c->setup_over = 1;
    c->st->unready--;
    if (c->err == ncclSuccess)
        zn_info(ZN_NET, "net transport: connected to rank %d (%s channel, net %s)", c->hdr.peer,
                zn_nt_channel_name(c->hdr.channel), c->st->net->name);
}

ncclResult_t zn_nt_conn_get(struct nt_state *st, int peer, int channel, int create,
                            struct nt_conn **out)
{
    struct nt_conn **slot = &st->conns[(size_t)peer * ZN_NCHANNELS + (size_t)channel];
    if (*slot || !create) {
        *out = *slot;
        return ncclSuccess;
    }
    struct nt_conn *c;
    ZN_CHECK(zn_calloc(&c, 1, "net transport connection"));
    c->hdr.ops = &zn_transport_net;
    c->hdr.peer = peer;
    c->hdr.channel = channel;
    c->st = st;
    c->deadline = INT64_MAX; /* set by connect(); a peer's HELLO alone does not start it */
    memcpy(c->handle, st->addrs[peer].handle, sizeof(c->handle));
    st->unready++;
    *slot = c;
    *out = c;
    return ncclSuccess;
}

ncclResult_t zn_nt_dir_open(struct nt_state *st, void *comm, struct nt_dir *d)
{
    size_t bytes = (size_t)st->nslots * (NT_HDR_BYTES + st->chunk);
    void *buf = NULL;
    if (posix_memalign(&buf, 4096, bytes) != 0)
        return zn_error(ncclSystemError, ZN_ALLOC,
                        "net transport: cannot allocate %zu bytes of staging slots", bytes);
    ncclResult_t r = nt_ops(st)->regMr(comm, buf, bytes, NCCL_PTR_HOST, &d->mh);
    if (r != ncclSuccess) {
        free(buf);
        return r;
    }
    d->buf = buf;
    return ncclSuccess;
}

static void dir_close(struct nt_state *st, void *comm, struct nt_dir *d)
{
    for (int i = 0; i < NT_MAX_SLOTS && comm; i++)
        if (d->umh[i]) nt_ops(st)->deregMr(comm, d->umh[i]);
    if (d->buf && comm) nt_ops(st)->deregMr(comm, d->mh);
    free(d->buf);
    d->buf = NULL;
}

void zn_nt_conn_close(struct nt_conn *c)
{
    struct nt_state *st = c->st;
    dir_close(st, c->send_comm, &c->s);
    dir_close(st, c->recv_comm, &c->r);
    if (c->send_comm) nt_ops(st)->closeSend(c->send_comm);
    if (c->recv_comm) nt_ops(st)->closeRecv(c->recv_comm);
    c->send_comm = c->recv_comm = NULL;
    /* A connect still in progress keeps its state behind the handle: one more call with an
     * abort would be needed to free it; the nets free it at their own close (socket net) or
     * when the deadline passes. */
}

/* ------------------------------------------------------------------------------------------ */
/* The listener: accepted recv comms and their HELLOs                                         */
/* ------------------------------------------------------------------------------------------ */

static void pending_drop(struct nt_state *st, int i)
{
    struct nt_pending *p = &st->pending[i];
    if (p->mh) nt_ops(st)->deregMr(p->comm, p->mh);
    if (p->comm) nt_ops(st)->closeRecv(p->comm);
    free(p->hello);
    st->pending[i] = st->pending[--st->npending];
}

static ncclResult_t pending_add(struct nt_state *st, void *comm)
{
    if (st->npending == NT_MAX_PENDING) {
        zn_warn(ZN_NET, "net transport: %d connections wait for their HELLO; closing a new one",
                NT_MAX_PENDING);
        nt_ops(st)->closeRecv(comm);
        return ncclSuccess;
    }
    if (st->npending == st->cap_pending) {
        int cap = st->cap_pending ? 2 * st->cap_pending : 16;
        void *p = realloc(st->pending, (size_t)cap * sizeof(*st->pending));
        if (!p) {
            nt_ops(st)->closeRecv(comm);
            return zn_error(ncclSystemError, ZN_ALLOC, "net transport: out of memory");
        }
        st->pending = p;
        st->cap_pending = cap;
    }
    struct nt_pending *p = &st->pending[st->npending++];
    *p = (struct nt_pending){ .comm = comm };
    if (posix_memalign((void **)&p->hello, 4096, 4096) != 0 ||
        nt_ops(st)->regMr(comm, p->hello, 4096, NCCL_PTR_HOST, &p->mh) != ncclSuccess) {
        p->mh = NULL;
        pending_drop(st, st->npending - 1);
        return zn_error(ncclSystemError, ZN_NET,
                        "net transport: cannot set up an accepted "
                        "connection's HELLO buffer");
    }
    return ncclSuccess;
}

/* The HELLO of pending[i] arrived (size bytes): move the comm into its connection, or close
 * it with one warning when it is not one of this communicator's. */
static void pending_file(struct nt_state *st, int i, int size)
{
    struct nt_pending *p = &st->pending[i];
    struct nt_hello h = *p->hello;
    const char *bad = size != (int)sizeof(h)             ? "its HELLO has the wrong size"
                      : h.magic != NT_HELLO_MAGIC        ? "its HELLO has the wrong magic"
                      : h.version != NT_HELLO_VERSION    ? "its HELLO is of another version"
                      : h.comm_hash != st->ctx.comm_hash ? "it belongs to another communicator"
                      : h.to != st->ctx.rank             ? "it is meant for another rank"
                      : h.rank < 0 || h.rank >= st->ctx.nranks || h.rank == st->ctx.rank
                          ? "it names a rank out of range"
                      : h.channel < 0 || h.channel >= ZN_NCHANNELS ? "it names no channel"
                                                                   : NULL;
    struct nt_conn *c = NULL;
    if (!bad && zn_nt_conn_get(st, h.rank, h.channel, 1, &c) != ncclSuccess)
        bad = "no memory for its connection";
    if (!bad && c->recv_comm) bad = "its connection already has one";
    if (bad) {
        zn_warn(ZN_NET, "net transport: closed an accepted %s connection: %s", st->net->name, bad);
        st->strays++;
        pending_drop(st, i);
        return;
    }
    if (c->err == ncclSuccess) {
        ncclResult_t r = zn_nt_dir_open(st, p->comm, &c->r);
        if (r != ncclSuccess) {
            char who[160];
            zn_peer_str(&st->ctx, c->hdr.peer, who, sizeof(who));
            zn_nt_fail(c, r, "net transport: cannot register receive slots for %s: %s", who,
                       zn_last_error());
        }
    }
    c->recv_comm = p->comm;
    nt_ops(st)->deregMr(p->comm, p->mh);
    free(p->hello);
    st->pending[i] = st->pending[--st->npending];
    if (nt_ready(c)) zn_nt_setup_over(c);
}

static void pending_poll(struct nt_state *st, int i, int *progressed)
{
    struct nt_pending *p = &st->pending[i];
    if (!p->req) {
        void *data = p->hello;
        size_t sz = 4096;
        int tag = NT_TAG;
        if (nt_ops(st)->irecv(p->comm, 1, &data, &sz, &tag, &p->mh, NULL, &p->req) != ncclSuccess) {
            zn_warn(ZN_NET, "net transport: closed an accepted connection: %s", zn_last_error());
            pending_drop(st, i);
            return;
        }
        if (!p->req) return;
    }
    int done = 0, size = 0;
    if (nt_ops(st)->test(p->req, &done, &size) != ncclSuccess) {
        zn_warn(ZN_NET, "net transport: closed an accepted connection before its HELLO: %s",
                zn_last_error());
        pending_drop(st, i);
        *progressed = 1;
        return;
    }
    if (!done) return;
    *progressed = 1;
    pending_file(st, i, size);
}

void zn_nt_accept_poll(struct nt_state *st, int *progressed)
{
    int64_t now = zn_now_ns();
    if (st->unready == 0 && st->npending == 0 && now < st->next_accept) return;
    st->next_accept = now + NT_IDLE_ACCEPT_NS;
    for (int k = 0; k < 64; k++) {
        void *comm = NULL;
        ncclNetDeviceHandle_t *dev = NULL;
        if (nt_ops(st)->accept(st->listen_comm, &comm, &dev) != ncclSuccess) {
            zn_warn(ZN_NET, "net transport: accept failed: %s", zn_last_error());
            break;
        }
        if (!comm) break;
        *progressed = 1;
        if (pending_add(st, comm) != ncclSuccess) break;
    }
    for (int i = st->npending - 1; i >= 0; i--) pending_poll(st, i, progressed);
}

/* ------------------------------------------------------------------------------------------ */
/* Per-communicator init / fini                                                               */
/* ------------------------------------------------------------------------------------------ */

/* ZINC_TRANSPORT=socket names this transport over the socket net; otherwise ZINC_NET / NCCL_NET
 * or the first net of the registry. */
static ncclResult_t pick_net(const struct zn_net **out)
{
    if (strcasecmp(zn_params()->transport, "socket") == 0) {
        *out = zn_net_find("Socket");
        if (!*out)
            return zn_error(ncclSystemError, ZN_NET | ZN_INIT,
                            "ZINC_TRANSPORT=socket: the socket net is not usable (no network "
                            "interface matches ZINC_SOCKET_IFNAME=\"%s\")",
                            zn_params()->socket_ifname);
        return ncclSuccess;
    }
    return zn_net_select(out);
}

static ncclResult_t open_net(struct nt_state *st)
{
    ZN_CHECK(pick_net(&st->net));
    ncclNetCommConfig_t cfg = { .trafficClass = NCCL_NET_TRAFFIC_CLASS_UNDEF };
    ZN_CHECK(nt_ops(st)->init(&st->nctx, st->ctx.comm_hash, &cfg, zn_net_logger, NULL));
    ncclNetProperties_t props;
    ZN_CHECK(nt_ops(st)->getProperties(st->dev, &props));
    if (!(props.ptrSupport & NCCL_PTR_HOST))
        return zn_error(ncclSystemError, ZN_NET | ZN_INIT,
                        "net transport: net %s cannot move host memory (ptrSupport %#x)",
                        st->net->name, (unsigned)props.ptrSupport);
    int64_t chunk = zn_params()->net_chunk, nslots = zn_params()->net_slots;
    size_t max = props.maxP2pBytes > NT_HDR_BYTES ? (size_t)props.maxP2pBytes - NT_HDR_BYTES : 0;
    st->chunk = chunk < 4096 ? 4096 : (size_t)chunk;
    if (max && st->chunk > max) st->chunk = max;
    st->nslots = nslots < 2 ? 2 : nslots > NT_MAX_SLOTS ? NT_MAX_SLOTS : (int)nslots;
    /* Direct mode only where registration records nothing (the socket net): on IB a sender's
     * chunk waits for the receiver to post its buffer, so a receive that fails (a length
     * mismatch) leaves the sender's send pending, where staging slots would have taken it. */
    st->direct = props.regIsGlobal && strcmp(st->net->name, "Socket") == 0;
    if (st->chunk != (size_t)chunk || st->nslots != nslots)
        zn_warn(ZN_NET | ZN_ENV,
                "net transport: ZINC_NET_CHUNK=%lld / ZINC_NET_SLOTS=%lld out of range for net "
                "%s: using %zu / %d",
                (long long)chunk, (long long)nslots, st->net->name, st->chunk, st->nslots);
    return ncclSuccess;
}

/* Every rank must use the same net: a handle of another net cannot be connected to. */
static ncclResult_t check_nets(const struct nt_state *st)
{
    for (int r = 0; r < st->ctx.nranks; r++) {
        if (strncmp(st->addrs[r].net, st->net->name, sizeof(st->addrs[r].net)) == 0) continue;
        char who[160];
        zn_peer_str(&st->ctx, r, who, sizeof(who));
        return zn_error(ncclInvalidUsage, ZN_NET | ZN_INIT,
                        "net transport: %s uses net \"%.31s\", this rank net \"%s\": every rank "
                        "must use the same net (ZINC_NET / NCCL_NET)",
                        who, st->addrs[r].net, st->net->name);
    }
    return ncclSuccess;
}

static void net_fini(void *state);

/* init -- the user thread, collective; blocks in the bootstrap allgather (ZINC_TIMEOUT). */
static ncclResult_t net_init(const struct zn_tctx *ctx, void **state)
{
    ncclResult_t res;
    if (ctx->nranks < 1 || ctx->rank < 0 || ctx->rank >= ctx->nranks || !ctx->peers)
        return zn_error(ncclInternalError, ZN_NET, "net transport: bad context (rank %d of %d)",
                        ctx->rank, ctx->nranks);
    struct nt_state *st;
    ZN_CHECK(zn_calloc(&st, 1, "net transport state"));
    st->ctx = *ctx;
    ZN_CHECK_GOTO(zn_calloc(&st->addrs, (size_t)ctx->nranks, "net transport handles"), res,
                  err_fini);
    ZN_CHECK_GOTO(
        zn_calloc(&st->conns, (size_t)ctx->nranks * ZN_NCHANNELS, "net transport connections"), res,
        err_fini);
    ZN_CHECK_GOTO(open_net(st), res, err_fini);
    struct nt_addr *me = &st->addrs[ctx->rank];
    snprintf(me->net, sizeof(me->net), "%s", st->net->name);
    ZN_CHECK_GOTO(nt_ops(st)->listen(st->nctx, st->dev, me->handle, &st->listen_comm), res,
                  err_fini);
    ZN_CHECK_GOTO(zn_boot_allgather(ctx->boot, st->addrs, sizeof(st->addrs[0])), res, err_fini);
    ZN_CHECK_GOTO(check_nets(st), res, err_fini);
    zn_info(ZN_NET | ZN_INIT, "net transport: net %s, %d slots of %zu bytes per direction",
            st->net->name, st->nslots, st->chunk);
    *state = st;
    return ncclSuccess;

err_fini:
    net_fini(st); /* closes the listener and frees what was allocated */
    return res;
}

/* fini -- the user thread; does not block: closing a comm returns at once. */
static void net_fini(void *state)
{
    struct nt_state *st = state;
    if (!st) return;
    for (size_t i = 0; st->conns && i < (size_t)st->ctx.nranks * ZN_NCHANNELS; i++) {
        if (!st->conns[i]) continue;
        zn_nt_conn_close(st->conns[i]);
        free(st->conns[i]);
    }
    while (st->npending > 0) pending_drop(st, st->npending - 1);
    if (st->listen_comm) nt_ops(st)->closeListen(st->listen_comm);
    if (st->nctx) nt_ops(st)->finalize(st->nctx);
    free(st->pending);
    free(st->conns);
    free(st->addrs);
    free(st);
}

static void net_abort(void *state, const char *msg)
{
    struct nt_state *st = state;
    for (size_t i = 0; st && i < (size_t)st->ctx.nranks * ZN_NCHANNELS; i++)
        if (st->conns[i]) zn_nt_send_abort(st->conns[i], msg);
}

const struct zn_net *zn_net_transport_net(void *state)
{
    return state ? ((struct nt_state *)state)->net : NULL;
}

const void *zn_net_transport_handle(void *state, int rank)
{
    struct nt_state *st = state;
    if (!st || rank < 0 || rank >= st->ctx.nranks) return NULL;
    return st->addrs[rank].handle;
}

int zn_net_transport_strays(void *state)
{
    return state ? ((struct nt_state *)state)->strays : 0;
}

/* The calibration of algo/registry.c's cost model: one message over the net (TCP figures:
 * the socket net is the common case, and query cannot see which net init chose). */
static void net_query(const struct zn_tctx *ctx, int peer, struct zn_transport_props *props)
{
    *props = (struct zn_transport_props){ .caps = ZN_TCAP_MSG | ZN_TCAP_RMA,
                                          .latency_us = 10.0,
                                          .bw = 2000.0 };
}

/* Any net reaches every rank. */
static int net_can_connect(const struct zn_tctx *ctx, int peer)
{
    return 1;
}

const struct zn_transport_ops zn_transport_net = {
    .size = sizeof(struct zn_transport_ops),
    .name = "net",
    /* Any thread; pure. */
    .can_connect = net_can_connect,
    /* User thread, collective; blocks in the bootstrap allgather (bounded by ZINC_TIMEOUT). */
    .init = net_init,
    /* User thread; never blocks: starts the net's non-blocking connect. */
    .connect = zn_nt_connect,
    /* User thread; never blocks: queue the request, progress moves the bytes. */
    .isend = zn_nt_isend,
    .irecv = zn_nt_irecv,
    /* User thread; never blocks: net isend / irecv / test, accepting connections. */
    .progress = zn_nt_progress,
    /* User thread; bounded (100 ms per connection at most): an abort chunk to every peer. */
    .abort = net_abort,
    /* User thread; never blocks: closes every comm and frees the state. */
    .fini = net_fini,
    /* Any thread; pure. */
    .query = net_query,
    /* The transport registers what it moves itself (its slots once; over the socket net each
     * chunk of the user's buffer, which costs nothing there): no user registration. */
    .reg = zn_transport_reg_unsupported,
    .dereg = zn_transport_dereg_unsupported,
};
