/*
 * Bootstrap point-to-point messages. A sender opens one connection per destination on first
 * use (HELLO kind P2P) and keeps it; messages are DATA frames carrying a tag. The receiver
 * reads every connection as frames arrive and files early messages by (source, tag), so
 * messages between the same pair with the same tag are delivered in order.
 */
#include "boot_internal.h"
#include "util/clock.h"
#include "util/err.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static ncclResult_t check_peer(struct zn_boot *b, int peer, const char *what)
{
    if (peer < 0 || peer >= b->nranks)
        return zn_error(ncclInternalError, ZN_BOOT, "bootstrap %s: peer %d out of range [0, %d)",
                        what, peer, b->nranks);
    if (b->failed)
        return zn_error(b->fail_code, ZN_BOOT, "bootstrap already failed; see the earlier error");
    return ncclSuccess;
}

ncclResult_t zn_boot_send(struct zn_boot *b, int peer, uint32_t tag, const void *buf, size_t len)
{
    ZN_CHECK(check_peer(b, peer, "send"));
    if (len > ZN_BOOT_MAX_DATA)
        return zn_error(ncclInternalError, ZN_BOOT, "bootstrap message of %zu bytes is too large",
                        len);
    struct zn_boot_hello h;
    struct zn_boot_frame hf = {
        .type = ZN_BOOT_HELLO, .version = ZN_BOOT_VERSION, .magic = b->magic, .len = sizeof(h)
    };
    int first = b->send_fd[peer] < 0;
    if (first) {
        int rc = zn_sock_connect(&b->addrs[peer], zn_now_ns() + zn_timeout_ns(), b->abort_flag,
                                 &b->send_fd[peer]);
        if (rc) return zn_boot_fail_peer(b, ncclRemoteError, peer, "connect", rc);
        ZN_CHECK(zn_boot_hello_make(b, b->send_fd[peer], ZN_HELLO_P2P, peer, "send", &h));
        struct boot_io io = { .send_fd = b->send_fd[peer],
                              .part = { &hf, &h },
                              .len = { sizeof(hf), sizeof(h) },
                              .recv_fd = -1,
                              .blame_send = peer,
                              .what = "send" };
        ZN_CHECK(zn_boot_io_run(b, &io));
    }
    uint32_t th[2] = { tag, 0 };
    struct zn_boot_frame f = {
        .type = ZN_BOOT_DATA, .version = ZN_BOOT_VERSION, .magic = b->magic, .len = sizeof(th) + len
    };
    struct boot_io io = { .send_fd = b->send_fd[peer],
                          .part = { &f, th, buf },
                          .len = { sizeof(f), sizeof(th), len },
                          .recv_fd = -1,
                          .blame_send = peer,
                          .what = "send" };
    return zn_boot_io_run(b, &io);
}

struct match {
    int src;
    uint32_t tag;
    struct boot_msg *found;
};

static int find_msg(struct zn_boot *b, void *arg)
{
    struct match *m = arg;
    for (struct boot_msg **p = &b->unexpected; *p; p = &(*p)->next) {
        if ((*p)->src == m->src && (*p)->tag == m->tag) {
            m->found = *p;
            *p = (*p)->next;
            if (!*p) b->unexpected_tail = p;
            return 1;
        }
    }
    return 0;
}

ncclResult_t zn_boot_recv(struct zn_boot *b, int peer, uint32_t tag, void *buf, size_t len)
{
    ZN_CHECK(check_peer(b, peer, "recv"));
    struct match m = { .src = peer, .tag = tag };
    if (!find_msg(b, &m)) {
        struct boot_io io = { .send_fd = -1,
                              .recv_fd = -1,
                              .until = find_msg,
                              .until_arg = &m,
                              .blame_recv = peer,
                              .what = "recv" };
        ZN_CHECK(zn_boot_io_run(b, &io));
    }
    ncclResult_t res = ncclSuccess;
    if (m.found->len != len) {
        char who[96];
        zn_boot_peer_str(b, peer, who, sizeof(who));
        res = zn_error(ncclInvalidUsage, ZN_BOOT,
                       "bootstrap recv: %s sent %zu bytes with tag %u, this rank expected %zu", who,
                       m.found->len, tag, len);
    } else {
        memcpy(buf, m.found->data + 8, len);
    }
    b->stats.msgs_recv++;
    b->stats.bytes_recv += sizeof(struct zn_boot_frame) + 8 + m.found->len;
    zn_boot_unqueue(b, m.found);
    free(m.found->data);
    free(m.found);
    return res;
}
