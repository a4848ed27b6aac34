/*
 * The socket transport: TCP connections between any two ranks, on the same host or not.
 * This file holds the ops table and per-communicator init / fini; socket_common.c the
 * helpers the files share, socket_conn.c sets connections up, socket_data.c moves the bytes
 * (socket_internal.h says what lives where, socket_wire.h what goes over the wire).
 *
 * Each rank opens one listener at init and allgathers its address; every connection of the
 * communicator, whatever its peer or channel, arrives on it. Rejected design: a listener per
 * (peer, channel), which costs a port and an allgather per connection and cannot be made
 * lazily, since connect() must not block.
 */
#include "socket_internal.h"
#include "util/clock.h"
#include "util/param.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* can_connect -- any thread, pure. TCP reaches every rank, on this host or another. */
static int socket_can_connect(const struct zn_tctx *ctx, int peer)
{
    return 1;
}

static int clamp_nsocks(int64_t v)
{
    if (v < 1) return 1;
    if (v > ZN_SOCKET_MAX_NSOCKS) return ZN_SOCKET_MAX_NSOCKS;
    return (int)v;
}

static void socket_fini(void *state);

/* init -- the user thread, collective over the communicator; blocks in the bootstrap
 * allgather of the listener addresses (bounded by ZINC_TIMEOUT). */
static ncclResult_t socket_init(const struct zn_tctx *ctx, void **state)
{
    ncclResult_t res;
    if (ctx->nranks < 1 || ctx->rank < 0 || ctx->rank >= ctx->nranks || !ctx->peers)
        return zn_error(ncclInternalError, ZN_NET,
                        "socket transport: bad context (rank %d of %d, peers %p)", ctx->rank,
                        ctx->nranks, (const void *)ctx->peers);
    struct zs_state *st;
    ZN_CHECK(zn_calloc(&st, 1, "socket transport state"));
    st->ctx = *ctx;
    st->lfd = -1;
    int64_t want = zn_params()->socket_nsocks;
    st->nsocks = clamp_nsocks(want);
    if (st->nsocks != want)
        zn_warn(ZN_NET | ZN_ENV, "ZINC_SOCKET_NSOCKS=%lld is out of [1, %d]: using %d",
                (long long)want, ZN_SOCKET_MAX_NSOCKS, st->nsocks);
    st->bufsize = zn_params()->socket_bufsize > 0 ? (size_t)zn_params()->socket_bufsize : 0;
    ZN_CHECK_GOTO(zn_calloc(&st->addrs, (size_t)ctx->nranks, "socket transport addresses"), res,
                  err_free_state);
    ZN_CHECK_GOTO(
        zn_calloc(&st->conns, (size_t)ctx->nranks * ZN_NCHANNELS, "socket transport conns"), res,
        err_free_state);

    union zn_sockaddr addr;
    char ifname[64] = "";
    int rc = zn_sock_local_addr(&addr, ifname, sizeof(ifname));
    if (rc) {
        res = zn_error(ncclSystemError, ZN_NET,
                       "socket transport: no network interface matches ZINC_SOCKET_IFNAME=\"%s\" "
                       "(%s)",
                       zn_params()->socket_ifname, strerror(-rc));
        goto err_free_state;
    }
    if (addr.sa.sa_family == AF_INET6)
        addr.in6.sin6_port = 0;
    else
        addr.in4.sin_port = 0;
    rc = zn_sock_listen(&addr, &st->lfd, &st->laddr);
    if (rc) {
        char a[ZN_SOCKADDR_STRLEN];
        zn_sockaddr_str(&addr, a, sizeof(a));
        res = zn_error(ncclSystemError, ZN_NET, "socket transport: cannot listen on %s (%s): %s", a,
                       ifname, strerror(-rc));
        goto err_free_state;
    }
    st->addrs[ctx->rank] = st->laddr;
    ZN_CHECK_GOTO(zn_boot_allgather(ctx->boot, st->addrs, sizeof(st->addrs[0])), res,
                  err_free_state);
    if (zn_log_enabled(ZN_LOG_INFO, ZN_NET | ZN_INIT)) {
        char a[ZN_SOCKADDR_STRLEN];
        zn_sockaddr_str(&st->laddr, a, sizeof(a));
        zn_info(ZN_NET | ZN_INIT, "socket transport: listening on %s (%s), %d socket(s) per peer",
                a, ifname, st->nsocks);
    }
    *state = st;
    return ncclSuccess;

err_free_state:
    socket_fini(st); /* closes the listener and frees what was allocated */
    return res;
}

/* fini -- the user thread; does not block: close() on our sockets returns at once. */
static void socket_fini(void *state)
{
    struct zs_state *st = state;
    if (!st) return;
    if (st->conns) {
        for (size_t i = 0; i < (size_t)st->ctx.nranks * ZN_NCHANNELS; i++) {
            if (!st->conns[i]) continue;
            zn_socket_conn_close(st->conns[i]);
            free(st->conns[i]);
        }
    }
    for (int i = 0; i < st->npending; i++) close(st->pending[i].fd);
    if (st->lfd >= 0) close(st->lfd);
    free(st->pending);
    free(st->conns);
    free(st->addrs);
    free(st);
}

static void socket_abort(void *state, const char *msg)
{
    struct zs_state *st = state;
    for (size_t i = 0; st && i < (size_t)st->ctx.nranks * ZN_NCHANNELS; i++)
        if (st->conns[i]) zn_socket_send_abort(st->conns[i], msg);
}

const union zn_sockaddr *zn_socket_listen_addr(void *state, int rank)
{
    struct zs_state *st = state;
    if (!st || rank < 0 || rank >= st->ctx.nranks) return NULL;
    return &st->addrs[rank];
}

int zn_socket_listen_port(void *state)
{
    struct zs_state *st = state;
    return st ? zn_sockaddr_port(&st->laddr) : -1;
}

/* The calibration of algo/registry.c's cost model: one message over TCP. */
static void socket_query(const struct zn_tctx *ctx, int peer, struct zn_transport_props *props)
{
    *props = (struct zn_transport_props){ .caps = ZN_TCAP_MSG, .latency_us = 10.0, .bw = 2000.0 };
}

const struct zn_transport_ops zn_transport_socket = {
    .size = sizeof(struct zn_transport_ops),
    .name = "socket",
    /* Any thread; pure. */
    .can_connect = socket_can_connect,
    /* User thread, collective; blocks in the bootstrap allgather (bounded by ZINC_TIMEOUT). */
    .init = socket_init,
    /* User thread; never blocks: starts non-blocking TCP connects (or finds the connection a
     * peer's HELLO already made); setup completes inside progress. */
    .connect = zn_socket_connect,
    /* User thread; never blocks: queue the request, progress moves the bytes. */
    .isend = zn_socket_isend,
    .irecv = zn_socket_irecv,
    /* User thread; never blocks: non-blocking sendmsg / recvmsg until the kernel says
     * EAGAIN, plus accepting and identifying connections on the shared listener. */
    .progress = zn_socket_progress,
    /* User thread; bounded (100 ms per peer at most): an ABORT frame on every idle socket. */
    .abort = socket_abort,
    /* User thread; never blocks: closes every socket and frees the state. */
    .fini = socket_fini,
    /* Any thread; pure. */
    .query = socket_query,
    /* Host memory needs no registration for TCP. */
    .reg = zn_transport_reg_unsupported,
    .dereg = zn_transport_dereg_unsupported,
};
