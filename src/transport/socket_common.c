/* The helpers shared by the files of the socket transport (socket_internal.h). */
#include "socket_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

const char *zn_socket_channel_name(int channel)
{
    switch (channel) {
    case ZN_CH_COLL: return "collective";
    case ZN_CH_P2P: return "point-to-point";
    default: return "unknown";
    }
}

void zn_socket_peer_str(const struct zs_conn *c, char *buf, size_t len)
{
    zn_peer_str(&c->st->ctx, c->hdr.peer, buf, len);
}

ncclResult_t zn_socket_fail(struct zs_conn *c, ncclResult_t code, const char *fmt, ...)
{
    /* The first error is the cause; anything after it is a consequence. */
    if (c->err != ncclSuccess) return zn_socket_sticky(c);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->errmsg, sizeof(c->errmsg), fmt, ap);
    va_end(ap);
    c->err = code;
    zn_socket_setup_over(c);
    return zn_error(code, ZN_NET, "%s", c->errmsg);
}

void zn_socket_setup_over(struct zs_conn *c)
{
    if (c->setup_over) return;
    c->setup_over = 1;
    c->st->unready--;
}

ncclResult_t zn_socket_sticky(struct zs_conn *c)
{
    zn_set_last_error(c->errmsg);
    return c->err;
}

ncclResult_t zn_socket_conn_get(struct zs_state *st, int peer, int channel, int create,
                                struct zs_conn **out)
{
    struct zs_conn **slot = &st->conns[(size_t)peer * ZN_NCHANNELS + (size_t)channel];
    if (*slot || !create) {
        *out = *slot;
        return ncclSuccess;
    }
    struct zs_conn *c;
    ZN_CHECK(zn_calloc(&c, 1, "socket transport connection"));
    c->hdr.ops = &zn_transport_socket;
    c->hdr.peer = peer;
    c->hdr.channel = channel;
    c->st = st;
    c->nsocks = st->nsocks;
    c->initiator = st->ctx.rank < peer;
    c->deadline = INT64_MAX; /* set by connect(); a peer's HELLO alone does not start it */
    for (int s = 0; s < ZN_SOCKET_MAX_NSOCKS; s++) c->socks[s].fd = -1;
    st->unready++;
    *slot = c;
    *out = c;
    return ncclSuccess;
}

void zn_socket_conn_close(struct zs_conn *c)
{
    for (int s = 0; s < ZN_SOCKET_MAX_NSOCKS; s++) {
        if (c->socks[s].fd >= 0) close(c->socks[s].fd);
        c->socks[s].fd = -1;
    }
}
