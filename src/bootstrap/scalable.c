/*
 * ncclCommInitRankScalable: several roots share one rendezvous.
 *
 * With nd distinct ids, rank r reports to root floor(r * nd / nranks), so root k serves the
 * contiguous range of ranks [lo(k), lo(k+1)) with lo(k) = ceil(k * nranks / nd).
 *
 * Each root runs the ordinary protocol of root.c, unchanged: it sees a job of its own in which
 * its range's ranks are numbered from 0, and answers each member with the address of the next
 * member. The ranges are linked into one ring by making the first rank of every range also the
 * last member of the previous non-empty range's job:
 *
 *     root 0: ranks 0 1 2 + 3       root 1: ranks 3 4 + 5        root 2: ranks 5 6 7 + 0
 *     its numbering 0 1 2   3       its numbering 0 1   2        its numbering 0 1 2   3
 *
 * Rank 2 learns rank 3's address from root 0, rank 4 learns rank 5's from root 1 and rank 7
 * learns rank 0's from root 2; the answer a linking rank gets from the previous root (the
 * first address of that range) is dropped. A root works in proportion to its range plus one,
 * and roots never talk to each other. The ring is then connected, and the addresses
 * allgathered over it, exactly as after a single-root rendezvous.
 *
 * A linking rank is in two jobs that wait for each other around the ring of roots, so it
 * sends both HELLOs before it waits for either answer.
 *
 * A root whose range is empty (more ids than ranks) would otherwise wait for its deadline and
 * warn that nobody joined: rank k % nranks closes root k by joining it as a one-rank job.
 *
 * Rejected: roots that forward addresses to each other. They would need each other's
 * addresses and magics, which the process that called ncclGetUniqueId does not have, and a
 * new message type; linking through the ranks keeps root.c and its wire format as they are.
 */
#include "boot_internal.h"
#include "util/clock.h"
#include "util/err.h"
#include "util/hmac.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct sroot {
    struct zn_unique_id id;
    union zn_sockaddr addr;
    int lo, hi; /* the ranks this root serves */
};

/* One HELLO this rank sends to a root, and its answer. */
struct sjoin {
    int root;
    int local, nlocal; /* this rank's number and the job size, as the root sees them */
    const char *role;  /* for messages */
    int fd;
    struct zn_frame_reader rd;
    int done;
    union zn_sockaddr next;
};

static int range_lo(int k, int nd, int nranks)
{
    return (int)(((int64_t)k * nranks + nd - 1) / nd);
}

/* Distinct ids in order of first appearance. Returns the count, or -1 for an id that was
 * never filled by ncclGetUniqueId. */
static int distinct_roots(const ncclUniqueId *ids, int nids, struct sroot *out)
{
    int nd = 0;
    for (int i = 0; i < nids; i++) {
        struct sroot r;
        memset(&r, 0, sizeof(r));
        memcpy(&r.id, ids[i].internal, sizeof(r.id));
        memcpy(&r.addr, r.id.root_addr, sizeof(r.addr));
        if (r.id.magic == 0 || (r.addr.sa.sa_family != AF_INET && r.addr.sa.sa_family != AF_INET6))
            return -1 - i;
        int dup = 0;
        for (int k = 0; k < nd && !dup; k++) dup = !memcmp(&out[k].id, &r.id, sizeof(r.id));
        if (!dup) out[nd++] = r;
    }
    return nd;
}

static void root_str(const struct sroot *roots, int nd, const struct sjoin *j, char *buf,
                     size_t len)
{
    const struct sroot *r = &roots[j->root];
    char a[ZN_SOCKADDR_STRLEN];
    zn_sockaddr_str(&r->addr, a, sizeof(a));
    if (r->hi > r->lo)
        snprintf(buf, len,
                 "bootstrap root %d of %d at %s (ranks %d-%d, which it numbers from 0; this rank "
                 "is its rank %d, as %s)",
                 j->root, nd, a, r->lo, r->hi - 1, j->local, j->role);
    else
        snprintf(buf, len, "bootstrap root %d of %d at %s (serves no rank; %s)", j->root, nd, a,
                 j->role);
}

static ncclResult_t join_fail(const struct sroot *roots, int nd, struct sjoin *j, int rc,
                              const char *stage)
{
    char who[256];
    root_str(roots, nd, j, who, sizeof(who));
    if (rc == 1) {
        /* An ERROR frame: the root's own explanation. */
        int32_t code = ncclRemoteError;
        char text[ZN_BOOT_MAX_ERROR + 1] = "";
        if (j->rd.hdr.len >= 4) {
            memcpy(&code, j->rd.payload, 4);
            memcpy(text, j->rd.payload + 4, j->rd.hdr.len - 4);
            text[j->rd.hdr.len - 4] = 0;
        }
        if (code <= ncclSuccess || code >= ncclNumResults || code == ncclInProgress)
            code = ncclRemoteError;
        return zn_error((ncclResult_t)code, ZN_BOOT, "%s: %s", who, text);
    }
    return zn_error(ncclRemoteError, ZN_BOOT, "%s: %s: %s", who, stage,
                    rc == -ETIMEDOUT   ? "no answer within ZINC_TIMEOUT"
                    : rc == -ECANCELED ? "aborted"
                    : rc == -EPIPE || rc == -ECONNRESET
                        ? "connection closed before all ranks joined"
                        : strerror(-rc));
}

/* The root's CHALLENGE into j->rd. 0, or a negative errno (1 is ERROR: join_fail says why). */
static int read_challenge(struct zn_boot *b, struct sjoin *j, uint64_t magic, int64_t deadline)
{
    int rc;
    while ((rc = zn_frame_reader_step(&j->rd, j->fd, magic, ZN_BOOT_CHALLENGE)) == 0) {
        struct pollfd p = { .fd = j->fd, .events = POLLIN };
        poll(&p, 1, zn_ms_left(deadline, 50));
        if (b->abort_flag && atomic_load(b->abort_flag)) return -ECANCELED;
        if (zn_now_ns() >= deadline) return -ETIMEDOUT;
    }
    if (rc == 1 && j->rd.hdr.type != ZN_BOOT_CHALLENGE) return 1;
    /* Not counted, like every CHALLENGE (bootstrap.h). */
    return rc == 1 ? 0 : rc;
}

/* Send every HELLO, then wait for every answer. */
static ncclResult_t exchange(struct zn_boot *b, const struct sroot *roots, int nd, struct sjoin *js,
                             int nj)
{
    int64_t deadline = zn_now_ns() + zn_timeout_ns() + 5000000000ll;
    for (int i = 0; i < nj; i++) {
        const struct sroot *r = &roots[js[i].root];
        int rc = zn_sock_connect(&r->addr, deadline, b->abort_flag, &js[i].fd);
        if (rc) return join_fail(roots, nd, &js[i], rc, "cannot connect");
        /* The root challenges every connection at once, whatever the other roots do. */
        rc = read_challenge(b, &js[i], r->id.magic, deadline);
        if (rc) return join_fail(roots, nd, &js[i], rc, "waiting for the challenge");
        struct zn_boot_hello h;
        zn_boot_hello_encode(&h, js[i].local, js[i].nlocal, ZN_HELLO_ROOT, &b->l.addr);
        zn_boot_hello_sign(&h, r->id.secret, r->id.magic, js[i].rd.payload);
        zn_frame_reader_reset(&js[i].rd);
        rc = zn_boot_send_frame(js[i].fd, ZN_BOOT_HELLO, r->id.magic, &h, sizeof(h), NULL, 0,
                                deadline, b->abort_flag);
        if (rc) return join_fail(roots, nd, &js[i], rc, "cannot send HELLO");
        zn_boot_count_sent(b, sizeof(struct zn_boot_frame) + sizeof(h));
    }
    struct pollfd pfds[64];
    for (;;) {
        int n = 0, left = 0;
        for (int i = 0; i < nj; i++) {
            if (js[i].done) continue;
            left++;
            int rc = zn_frame_reader_step(&js[i].rd, js[i].fd, roots[js[i].root].id.magic,
                                          ZN_BOOT_RING_INFO);
            if (rc < 0) return join_fail(roots, nd, &js[i], rc, "waiting for the answer");
            if (rc == 1) zn_boot_count_recv(b, &js[i].rd);
            if (rc == 1 && js[i].rd.hdr.type != ZN_BOOT_RING_INFO)
                return join_fail(roots, nd, &js[i], 1, "");
            if (rc == 1) {
                struct zn_boot_ring_info info;
                if (js[i].rd.hdr.len != sizeof(info))
                    return zn_error(ncclInternalError, ZN_BOOT,
                                    "bootstrap root %d sent a malformed answer", js[i].root);
                memcpy(&info, js[i].rd.payload, sizeof(info));
                memset(&js[i].next, 0, sizeof(js[i].next));
                memcpy(&js[i].next, info.next_addr, sizeof(js[i].next));
                js[i].done = 1;
                close(js[i].fd);
                js[i].fd = -1;
                left--;
                continue;
            }
            if (n < 64) pfds[n++] = (struct pollfd){ .fd = js[i].fd, .events = POLLIN };
        }
        if (left == 0) return ncclSuccess;
        for (int i = 0; i < nj; i++)
            if (!js[i].done && (b->abort_flag && atomic_load(b->abort_flag)))
                return join_fail(roots, nd, &js[i], -ECANCELED, "waiting for the answer");
        if (zn_now_ns() >= deadline)
            for (int i = 0; i < nj; i++)
                if (!js[i].done)
                    return join_fail(roots, nd, &js[i], -ETIMEDOUT, "waiting for the answer");
        poll(pfds, (nfds_t)n, zn_ms_left(deadline, 50));
    }
}

/* The HELLOs this rank sends: its own root, the previous root as a link, the empty roots it
 * closes. Returns the count. */
static int plan_joins(const struct sroot *roots, int nd, int rank, int nranks, struct sjoin *js)
{
    int used = 0;
    for (int k = 0; k < nd; k++) used += roots[k].hi > roots[k].lo;
    int mine = (int)((int64_t)rank * nd / nranks), nj = 0;
    const struct sroot *r = &roots[mine];
    js[nj++] = (struct sjoin){
        .root = mine, .local = rank - r->lo, .nlocal = r->hi - r->lo + (used > 1), .role = "member"
    };
    if (used > 1 && rank == r->lo) {
        int prev = mine;
        do prev = (prev + nd - 1) % nd;
        while (roots[prev].hi == roots[prev].lo);
        int size = roots[prev].hi - roots[prev].lo;
        js[nj++] = (struct sjoin){
            .root = prev, .local = size, .nlocal = size + 1, .role = "link to the next range"
        };
    }
    /* A root made from ZINC_COMM_ID runs only once a rank starts it: an empty one never does. */
    for (int k = 0; k < nd; k++)
        if (roots[k].hi == roots[k].lo && k % nranks == rank && !roots[k].id.rank0_hosts_root)
            js[nj++] = (struct sjoin){ .root = k, .local = 0, .nlocal = 1, .role = "closing it" };
    for (int i = 0; i < nj; i++) js[i].fd = -1;
    return nj;
}

ncclResult_t zn_boot_init_scalable(const ncclUniqueId *ids, int nids, int rank, int nranks,
                                   const atomic_int *abort_flag, struct zn_boot **out)
{
    struct sroot *roots = calloc((size_t)nids, sizeof(*roots));
    if (!roots) return zn_error(ncclSystemError, ZN_BOOT, "out of memory");
    int nd = distinct_roots(ids, nids, roots);
    if (nd < 0) {
        free(roots);
        return zn_error(ncclInvalidArgument, ZN_BOOT,
                        "commIds[%d] is not a unique id made by ncclGetUniqueId (magic 0 or no "
                        "root address): was it shared with every rank?",
                        -1 - nd);
    }
    if (nd == 1) {
        ncclUniqueId one;
        memset(&one, 0, sizeof(one));
        memcpy(one.internal, &roots[0].id, sizeof(roots[0].id));
        free(roots);
        return zn_boot_init(&one, rank, nranks, abort_flag, out);
    }
    /* The job's magic depends on every root's, so two jobs sharing a root never mix. */
    uint64_t magic = 0xcbf29ce484222325ull;
    /* So does its secret, which every root's id holds a share of. */
    static const char label[] = "zinc-scalable-secret";
    uint8_t secret[ZN_BOOT_SECRET_BYTES];
    struct zn_sha256 sh;
    zn_sha256_init(&sh);
    zn_sha256_update(&sh, label, sizeof(label) - 1);
    for (int k = 0; k < nd; k++) {
        roots[k].lo = range_lo(k, nd, nranks);
        roots[k].hi = range_lo(k + 1, nd, nranks);
        magic = (magic ^ roots[k].id.magic) * 0x100000001b3ull;
        magic ^= magic >> 31;
        zn_sha256_update(&sh, roots[k].id.secret, sizeof(roots[k].id.secret));
    }
    zn_sha256_final(&sh, secret);
    /* Own root, a link and at most ceil(nd / nranks) empty roots. */
    int maxj = 2 + nd / nranks + 1, nj = 0;
    struct sjoin *js = calloc((size_t)maxj, sizeof(*js));
    struct zn_boot *b = NULL;
    const struct sroot *mine = NULL;
    union zn_sockaddr next;
    ncclResult_t res = ncclSuccess;
    if (!js) {
        res = zn_error(ncclSystemError, ZN_BOOT, "out of memory");
        goto out;
    }
    nj = plan_joins(roots, nd, rank, nranks, js);
    ZN_CHECK_GOTO(zn_boot_alloc(magic | 1, secret, rank, nranks, abort_flag, &b), res, out);
    ZN_CHECK_GOTO(zn_boot_listener_create(&b->l), res, out);
    /* An id from ZINC_COMM_ID: the first rank of its range hosts the root. */
    mine = &roots[js[0].root];
    if (mine->id.rank0_hosts_root && rank == mine->lo) {
        union zn_sockaddr bound;
        ZN_CHECK_GOTO(zn_boot_root_start(&mine->addr, mine->id.magic, mine->id.secret, &bound), res,
                      out);
    }
    ZN_CHECK_GOTO(exchange(b, roots, nd, js, nj), res, out);
    next = js[0].next;
    b->addrs[(rank + 1) % nranks] = next;
    ZN_CHECK_GOTO(zn_boot_ring_connect(b, &next), res, out);
    b->addrs[rank] = b->l.addr;
    ZN_CHECK_GOTO(zn_boot_share_addrs(b, 0), res, out);
    zn_info(ZN_BOOT, "bootstrap: rank %d of %d connected through root %d of %d (ranks %d-%d)", rank,
            nranks, js[0].root, nd, mine->lo, mine->hi - 1);
    *out = b;
    b = NULL;
out:
    for (int i = 0; js && i < nj; i++) {
        if (js[i].fd >= 0) close(js[i].fd);
        zn_frame_reader_reset(&js[i].rd);
    }
    zn_boot_destroy(b);
    free(js);
    free(roots);
    return res;
}
