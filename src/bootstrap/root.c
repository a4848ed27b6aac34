/*
 * The bootstrap root: a thread that serves one rendezvous. It accepts connections from the
 * ranks, checks each one's magic and HELLO, and when all nranks have arrived sends every rank
 * the address of its ring successor, then exits.
 *
 * It serves all connections from one poll() loop with an incremental frame reader per
 * connection, so a stray connection that sends nothing, sends garbage or announces a huge
 * length costs only its own descriptor: it is closed and logged and the root keeps serving.
 * Each connection gets a CHALLENGE at once; its HELLO must answer it with the job secret
 * (wire.h) and come within ZINC_TIMEOUT.
 *
 * A root of ncclCommGrow (zn_boot_root_start_grow) serves one rendezvous too, but its id must
 * not serve a second one: after it answered its ranks it keeps listening until its deadline and
 * answers every later rank that proves the secret with an ERROR saying that the id was used,
 * so a reuse fails at once with that reason instead of timing out against a closed port. Its
 * holder (the communicator that handed the id out) may fail it early through a pipe, so that
 * ranks waiting for a grow that will not come learn why at once.
 */
#include "bootstrap.h"
#include "wire.h"
#include "util/clock.h"
#include "util/err.h"
#include "util/thread.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct root_conn {
    int fd;
    int rank; /* -1 until its HELLO arrived */
    struct zn_frame_reader rd;
    union zn_sockaddr listen_addr;
    uint32_t flags; /* of its HELLO */
    char peer[ZN_SOCKADDR_STRLEN];
    uint8_t nonce[ZN_BOOT_NONCE_BYTES]; /* of the CHALLENGE it got */
    int64_t deadline;                   /* for its HELLO */
};

struct root {
    int lfd;
    uint64_t magic;
    uint8_t secret[ZN_BOOT_SECRET_BYTES];
    int nranks; /* 0 until the first HELLO */
    int njoined;
    struct root_conn *conns;
    int nconns, cap;
    int *conn_of_rank;
    int64_t deadline;
    char where[ZN_SOCKADDR_STRLEN];
    /* After a failure the root stays until the deadline and tells ranks that join late why
     * the job failed, instead of leaving them to time out against a closed port. */
    int failed;
    ncclResult_t fail_code;
    char fail_msg[512];
    /* Roots of ncclCommGrow only (see above); ctl is -1, -1 and refs 1 for the others. The
     * holder writes a struct root_ctl into ctl[1]; refs counts the thread and the holder. */
    int single_use;
    int ctl[2];
    atomic_int refs;
};

/* What the holder of a grow root sends through its pipe to fail it (under PIPE_BUF: one
 * atomic write). */
struct root_ctl {
    int32_t code;
    char text[508];
};

/* The holder's handle (bootstrap.h). */
struct zn_boot_root {
    struct root *r;
};

static void root_put(struct root *r)
{
    if (atomic_fetch_sub(&r->refs, 1) != 1) return;
    if (r->ctl[0] >= 0) close(r->ctl[0]);
    if (r->ctl[1] >= 0) close(r->ctl[1]);
    free(r);
}

static void conn_close(struct root *r, int i)
{
    close(r->conns[i].fd);
    zn_frame_reader_reset(&r->conns[i].rd);
    r->conns[i] = r->conns[--r->nconns];
    /* The moved connection's rank slot must follow it. */
    if (i < r->nconns && r->conns[i].rank >= 0) r->conn_of_rank[r->conns[i].rank] = i;
}

/* Send ERROR to every rank that joined, so that each fails with the root's explanation. */
static void fail_all(struct root *r, ncclResult_t code, const char *msg)
{
    zn_warn(ZN_BOOT, "bootstrap root %s: %s", r->where, msg);
    r->failed = 1;
    r->fail_code = code;
    snprintf(r->fail_msg, sizeof(r->fail_msg), "%s", msg);
    int32_t c = (int32_t)code;
    int64_t deadline = zn_now_ns() + 2000000000ll;
    for (int i = 0; i < r->nconns; i++)
        if (r->conns[i].rank >= 0)
            zn_boot_send_frame(r->conns[i].fd, ZN_BOOT_ERROR, r->magic, &c, sizeof(c), msg,
                               strlen(msg), deadline, NULL);
}

static void missing_ranks(struct root *r, char *buf, size_t len)
{
    size_t o = 0;
    int shown = 0;
    buf[0] = 0;
    for (int k = 0; k < r->nranks && o + 16 < len; k++) {
        if (r->conn_of_rank[k] >= 0) continue;
        if (shown++ == 32) {
            snprintf(buf + o, len - o, ", ...");
            return;
        }
        o += (size_t)snprintf(buf + o, len - o, "%s%d", o ? ", " : "", k);
    }
}

static int accept_all(struct root *r)
{
    for (;;) {
        int fd;
        int rc = zn_sock_try_accept(r->lfd, &fd);
        if (rc == -EAGAIN) return 0;
        if (rc) return 0; /* transient accept errors (ECONNABORTED, EMFILE) are not fatal */
        if (r->nconns == r->cap) {
            int cap = r->cap ? r->cap * 2 : 64;
            struct root_conn *c = realloc(r->conns, (size_t)cap * sizeof(*c));
            if (!c) {
                close(fd);
                return -ENOMEM;
            }
            r->conns = c;
            r->cap = cap;
        }
        struct root_conn *c = &r->conns[r->nconns++];
        memset(c, 0, sizeof(*c));
        c->fd = fd;
        c->rank = -1;
        union zn_sockaddr pa;
        socklen_t plen = sizeof(pa);
        if (getpeername(fd, &pa.sa, &plen) == 0)
            zn_sockaddr_str(&pa, c->peer, sizeof(c->peer));
        else
            snprintf(c->peer, sizeof(c->peer), "?");
        c->deadline = zn_deadline_from_now();
        if (zn_boot_send_challenge(fd, r->magic, c->nonce) != 0) {
            close(fd);
            r->nconns--;
        }
    }
}

/* Handle a complete HELLO. Returns 0, or -1 when the whole rendezvous must fail. */
static int register_rank(struct root *r, int i)
{
    struct root_conn *c = &r->conns[i];
    struct zn_boot_hello h;
    char msg[512];
    if (c->rd.hdr.type != ZN_BOOT_HELLO ||
        zn_boot_hello_decode(c->rd.payload, c->rd.hdr.len, &h, &c->listen_addr) != 0 ||
        h.kind != ZN_HELLO_ROOT) {
        zn_warn(ZN_BOOT, "bootstrap root %s: closed connection from %s: malformed HELLO", r->where,
                c->peer);
        conn_close(r, i);
        return 0;
    }
    if (!zn_boot_hello_verify(&h, r->secret, r->magic, c->nonce)) {
        zn_warn(ZN_BOOT,
                "bootstrap root %s: closed connection from %s: it did not prove the job secret "
                "(a stranger, another job, or a rank with another ZINC_JOB_SECRET)",
                r->where, c->peer);
        conn_close(r, i);
        return 0;
    }
    if (r->failed) {
        int32_t code = (int32_t)r->fail_code;
        zn_boot_send_frame(c->fd, ZN_BOOT_ERROR, r->magic, &code, sizeof(code), r->fail_msg,
                           strlen(r->fail_msg), zn_now_ns() + 1000000000ll, NULL);
        conn_close(r, i);
        return 0;
    }
    if (r->nranks == 0) {
        r->nranks = h.nranks;
        r->conn_of_rank = malloc((size_t)h.nranks * sizeof(int));
        if (!r->conn_of_rank) {
            r->nranks = 0;
            fail_all(r, ncclSystemError, "bootstrap root out of memory");
            return -1;
        }
        for (int k = 0; k < h.nranks; k++) r->conn_of_rank[k] = -1;
    }
    if (h.nranks != r->nranks) {
        c->rank = h.rank; /* so fail_all tells it too */
        snprintf(msg, sizeof(msg),
                 "rank %d (%s) was started with nranks=%d but an earlier rank with nranks=%d",
                 h.rank, c->peer, h.nranks, r->nranks);
        fail_all(r, ncclInvalidUsage, msg);
        return -1;
    }
    if (r->conn_of_rank[h.rank] >= 0) {
        c->rank = h.rank;
        snprintf(msg, sizeof(msg), "rank %d joined twice (from %s and from %s)", h.rank,
                 r->conns[r->conn_of_rank[h.rank]].peer, c->peer);
        fail_all(r, ncclInvalidUsage, msg);
        return -1;
    }
    c->rank = h.rank;
    c->flags = h.flags;
    r->conn_of_rank[h.rank] = i;
    r->njoined++;
    zn_frame_reader_reset(&c->rd);
    zn_trace(ZN_BOOT, "bootstrap root: rank %d of %d joined from %s", h.rank, h.nranks, c->peer);
    return 0;
}

/* Every rank's address, to a rank that asked (rank 0: it sends them on, coll.c). O(n) bytes
 * once, where a table for every rank would be O(n^2) at the root. */
static int send_table(struct root *r, int fd, int64_t deadline)
{
    union zn_sockaddr *t = calloc((size_t)r->nranks, sizeof(*t));
    if (!t) return -ENOMEM;
    for (int q = 0; q < r->nranks; q++) t[q] = r->conns[r->conn_of_rank[q]].listen_addr;
    uint32_t hdr[2] = { ZN_BOOT_TAG_ADDRS, 0 };
    int rc = zn_boot_send_frame(fd, ZN_BOOT_DATA, r->magic, hdr, sizeof(hdr), t,
                                (size_t)r->nranks * sizeof(*t), deadline, NULL);
    free(t);
    return rc;
}

/* Everyone is here: tell each rank its successor's address. */
static void send_ring_info(struct root *r)
{
    int64_t deadline = zn_now_ns() + zn_timeout_ns();
    for (int k = 0; k < r->nranks; k++) {
        struct zn_boot_ring_info info;
        memset(&info, 0, sizeof(info));
        info.nranks = r->nranks;
        const struct root_conn *next = &r->conns[r->conn_of_rank[(k + 1) % r->nranks]];
        memcpy(info.next_addr, &next->listen_addr, sizeof(next->listen_addr));
        const struct root_conn *c = &r->conns[r->conn_of_rank[k]];
        int rc = zn_boot_send_frame(c->fd, ZN_BOOT_RING_INFO, r->magic, &info, sizeof(info), NULL,
                                    0, deadline, NULL);
        if (rc == 0 && (c->flags & ZN_HELLO_WANT_TABLE)) rc = send_table(r, c->fd, deadline);
        if (rc)
            zn_warn(ZN_BOOT, "bootstrap root %s: could not answer rank %d: %s", r->where, k,
                    strerror(-rc));
    }
}

/* One readable connection. Returns -1 when the rendezvous must fail. */
static int serve_conn(struct root *r, int i)
{
    struct root_conn *c = &r->conns[i];
    char msg[512];
    if (c->rank >= 0 && r->failed) {
        conn_close(r, i);
        return 0;
    }
    if (c->rank >= 0) {
        /* A joined rank sends nothing more; readability means it went away. */
        char b;
        size_t n;
        int rc = zn_sock_recv_some(c->fd, &b, 1, &n);
        if (rc == 0 && n == 0) return 0;
        snprintf(msg, sizeof(msg),
                 "rank %d (%s) disconnected before all %d ranks joined (%d had joined)", c->rank,
                 c->peer, r->nranks, r->njoined);
        fail_all(r, ncclRemoteError, msg);
        return -1;
    }
    int rc = zn_frame_reader_step(&c->rd, c->fd, r->magic, ZN_BOOT_HELLO);
    if (rc == 0) return 0;
    if (rc == 1) return register_rank(r, i);
    if (rc == -EBADMSG)
        zn_warn(ZN_BOOT,
                "bootstrap root %s: closed connection from %s: it did not present this job's "
                "magic (another job, or not zinc)",
                r->where, c->peer);
    else if (rc != -EPIPE && rc != -ECONNRESET)
        zn_warn(ZN_BOOT, "bootstrap root %s: closed connection from %s: %s", r->where, c->peer,
                rc == -EMSGSIZE ? "message length out of bounds" : strerror(-rc));
    conn_close(r, i);
    return 0;
}

/* The holder failed this grow root (zn_boot_root_close): tell the ranks that joined, and those
 * that join until the deadline, why. Quiet when nobody joined: a grow that never started. */
static void serve_ctl(struct root *r)
{
    struct root_ctl m;
    ssize_t n = read(r->ctl[0], &m, sizeof(m));
    if (n < (ssize_t)sizeof(m.code) || r->failed) return;
    size_t len = (size_t)n - sizeof(m.code);
    if (len >= sizeof(m.text)) len = sizeof(m.text) - 1;
    m.text[len] = 0;
    ncclResult_t code = (ncclResult_t)m.code;
    if (r->njoined > 0) {
        fail_all(r, code, m.text);
        return;
    }
    zn_info(ZN_BOOT, "bootstrap root %s: %s", r->where, m.text);
    r->failed = 1;
    r->fail_code = code;
    snprintf(r->fail_msg, sizeof(r->fail_msg), "%s", m.text);
}

/* Serve connections until every rank joined (1), or until the deadline once the rendezvous
 * failed or nobody joined in time (0). */
static int root_serve(struct root *r)
{
    struct pollfd *pfds = NULL;
    int pcap = 0, all_joined = 0;
    while (r->failed || r->nranks == 0 || r->njoined < r->nranks) {
        if (zn_now_ns() >= r->deadline) {
            if (r->failed) goto out;
            char missing[256], msg[512];
            if (r->nranks) {
                missing_ranks(r, missing, sizeof(missing));
                snprintf(
                    msg, sizeof(msg),
                    "only %d of %d ranks joined within ZINC_TIMEOUT=%lld s; missing rank(s): %s",
                    r->njoined, r->nranks, (long long)(zn_timeout_ns() / 1000000000), missing);
            } else {
                snprintf(msg, sizeof(msg), "no rank joined within ZINC_TIMEOUT");
            }
            fail_all(r, ncclRemoteError, msg);
            goto out;
        }
        int64_t now = zn_now_ns();
        for (int i = r->nconns - 1; i >= 0; i--)
            if (r->conns[i].rank < 0 && now > r->conns[i].deadline) {
                zn_warn(ZN_BOOT,
                        "bootstrap root %s: closed connection from %s: no HELLO within "
                        "ZINC_TIMEOUT",
                        r->where, r->conns[i].peer);
                conn_close(r, i);
            }
        if (pcap < r->nconns + 2) {
            pcap = (r->nconns + 2) * 2;
            struct pollfd *p = realloc(pfds, (size_t)pcap * sizeof(*p));
            if (!p) goto out;
            pfds = p;
        }
        pfds[0] = (struct pollfd){ .fd = r->lfd, .events = POLLIN };
        for (int i = 0; i < r->nconns; i++)
            pfds[i + 1] = (struct pollfd){ .fd = r->conns[i].fd, .events = POLLIN };
        int nfds = r->nconns + 1;
        /* Last: the holder's pipe (-1 for roots without one, which poll ignores). */
        pfds[nfds] = (struct pollfd){ .fd = r->ctl[0], .events = POLLIN };
        int n = poll(pfds, (nfds_t)nfds + 1, zn_ms_left(r->deadline, 1000));
        if (n <= 0) continue;
        if (pfds[nfds].revents) serve_ctl(r);
        /* Walk connections from the end: conn_close moves the last one into the hole. */
        for (int i = nfds - 2; i >= 0; i--)
            if (pfds[i + 1].revents) serve_conn(r, i);
        if (pfds[0].revents && accept_all(r) < 0) goto out;
    }
    all_joined = 1;
out:
    free(pfds);
    return all_joined;
}

static void root_loop(struct root *r)
{
    if (!root_serve(r)) return;
    /* Close the listener first so that a later job reusing the address finds it free. A grow
     * root keeps its own (ephemeral) port to answer late ranks. */
    if (!r->single_use) {
        close(r->lfd);
        r->lfd = -1;
    }
    send_ring_info(r);
    if (!r->single_use) return;
    while (r->nconns) conn_close(r, r->nconns - 1);
    r->failed = 1;
    r->fail_code = ncclInvalidUsage;
    snprintf(r->fail_msg, sizeof(r->fail_msg),
             "this unique id was used already: an id from ncclCommGetUniqueId serves one "
             "ncclCommGrow (call ncclCommGetUniqueId again for another grow)");
    root_serve(r);
}

static void *root_main(void *arg)
{
    struct root *r = arg;
    root_loop(r);
    if (r->lfd >= 0) close(r->lfd);
    while (r->nconns) conn_close(r, r->nconns - 1);
    free(r->conns);
    free(r->conn_of_rank);
    root_put(r);
    return NULL;
}

/* Start a root; a grow root (handle not NULL) also gets its pipe and the holder's reference. */
static ncclResult_t root_start(const union zn_sockaddr *addr, uint64_t magic,
                               const uint8_t secret[ZN_BOOT_SECRET_BYTES], union zn_sockaddr *bound,
                               struct zn_boot_root **handle)
{
    struct zn_boot_root *h = NULL;
    struct root *r = calloc(1, sizeof(*r));
    if (handle) h = calloc(1, sizeof(*h));
    if (!r || (handle && !h)) {
        free(r);
        free(h);
        return zn_error(ncclSystemError, ZN_BOOT, "out of memory starting bootstrap root");
    }
    r->ctl[0] = r->ctl[1] = -1;
    atomic_init(&r->refs, handle ? 2 : 1);
    r->single_use = handle != NULL;
    if (handle && pipe2(r->ctl, O_CLOEXEC | O_NONBLOCK) != 0) {
        int e = errno;
        free(r);
        free(h);
        return zn_error(ncclSystemError, ZN_BOOT, "bootstrap root: pipe failed: %s", strerror(e));
    }
    char want[ZN_SOCKADDR_STRLEN];
    zn_sockaddr_str(addr, want, sizeof(want));
    int rc = zn_sock_listen(addr, &r->lfd, bound);
    if (rc) {
        atomic_store(&r->refs, 1);
        root_put(r);
        free(h);
        return zn_error(ncclSystemError, ZN_BOOT, "bootstrap root cannot listen on %s: %s%s", want,
                        strerror(-rc),
                        rc == -EADDRINUSE ? " (another job uses this ZINC_COMM_ID?)" : "");
    }
    r->magic = magic;
    memcpy(r->secret, secret, sizeof(r->secret));
    r->deadline = zn_now_ns() + zn_timeout_ns();
    zn_sockaddr_str(bound, r->where, sizeof(r->where));
    int err = zn_thread_start_detached(root_main, r);
    if (err) {
        close(r->lfd);
        atomic_store(&r->refs, 1);
        root_put(r);
        free(h);
        return zn_error(ncclSystemError, ZN_BOOT, "cannot start bootstrap root thread: %s",
                        strerror(err));
    }
    zn_info(ZN_BOOT, "bootstrap root%s listening on %s", handle ? " (single use)" : "", r->where);
    if (handle) {
        h->r = r;
        *handle = h;
    }
    return ncclSuccess;
}

ncclResult_t zn_boot_root_start(const union zn_sockaddr *addr, uint64_t magic,
                                const uint8_t secret[ZN_BOOT_SECRET_BYTES],
                                union zn_sockaddr *bound)
{
    return root_start(addr, magic, secret, bound, NULL);
}

ncclResult_t zn_boot_root_start_grow(const union zn_sockaddr *addr, uint64_t magic,
                                     const uint8_t secret[ZN_BOOT_SECRET_BYTES],
                                     union zn_sockaddr *bound, struct zn_boot_root **handle)
{
    return root_start(addr, magic, secret, bound, handle);
}

void zn_boot_root_close(struct zn_boot_root *h, ncclResult_t code, const char *why)
{
    if (!h) return;
    struct root_ctl m = { .code = (int32_t)code };
    size_t len = strlen(why);
    if (len > sizeof(m.text)) len = sizeof(m.text);
    memcpy(m.text, why, len);
    /* The root reads its pipe until its thread ends; afterwards nobody needs to hear this. */
    if (write(h->r->ctl[1], &m, sizeof(m.code) + len) < 0)
        zn_info(ZN_BOOT, "bootstrap root: cannot pass on \"%s\": %s", why, strerror(errno));
    zn_boot_root_release(h);
}

void zn_boot_root_release(struct zn_boot_root *h)
{
    if (!h) return;
    root_put(h->r);
    free(h);
}
