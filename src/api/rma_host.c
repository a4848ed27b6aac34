/*
 * One-sided operations on host communicators (rma.c says how the pieces fit).
 *
 * SHM pairs (host memory, one host, one pid namespace, shm chosen by the transports): a put is
 * a cross-memory attach write into the peer's window through the shm transport's one-sided
 * table (transport/shm_rma.c): the window's key (pid, address) was exchanged when it was
 * registered and is imported at the first put into that peer's part; the source is made a
 * region for the duration of the call. The signal that follows is a release store, into the
 * peer's word for (this rank, sigIdx, ctx), of this rank's running count of signals sent there
 * (one writer per word: a store is enough). Both complete in the caller: a put never waits for
 * the target, and process_vm_writev has written the peer's memory when it returns, so a
 * reader that sees the count sees the data.
 *
 * Whether the kernel allows cross-memory attach (ptrace rules: Yama, containers) is probed at
 * setup: every rank reads one byte of each SHM candidate peer. If any rank is refused, no pair
 * uses SHM: they all go through the GIN engine (one verdict, so that both sides of every pair
 * agree). Setup's layout of the exchanged records:
 *
 *   round 1 (8 bytes per rank):   | address of the probe word                               |
 *   round 2 (184 bytes per rank): | probes ok | GIN peers if SHM works | if not | pad | key |
 *
 * key: the shm segment holding this rank's signal words (nranks * nctx * ZN_RMA_NSIG, indexed
 * by sender), made for every candidate peer and mapped by all of them at setup, so that its
 * name is unlinked at once.
 *
 * Waits poll the words (the SHM segment's, or the GIN engine's for GIN peers): they spin, then
 * yield, then nap, and give up when a peer they wait for exited (its pidfd), when the GIN
 * engine failed, on ncclCommAbort, or after ZINC_TIMEOUT without any signal arriving.
 */
#include "rma.h"
#include "devapi.h"
#include "util/clock.h"
#include "util/param.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

struct zn_rma_host {
    uint64_t *sig;           /* this rank's signal words: in the segment, or calloc'd */
    void *sig_region;        /* the segment (zn_shm_rma mem_alloc's handle), or NULL */
    void **peer_sig;         /* per SHM peer: its signal words, imported */
    struct zn_conn **ep;     /* per SHM peer: the one-sided connection, opened at first use */
    uint64_t *sent;          /* per (peer, ctx, sig): signals sent to that peer (SHM) */
    uint64_t *consumed;      /* per (sender, ctx, sig): signals that waits consumed */
    volatile uint64_t probe; /* peers read it to test cross-memory attach */
};

/* A window's key for cross-memory attach on every rank (exchanged at registration). */
struct zn_rma_win {
    void *dom;
    void *region; /* this rank's buffer as a region of dom */
    int nranks;
    struct zn_rma_key *keys;
    void **remote; /* imported at the first put to that peer */
};

struct probe_rec {
    uint64_t addr;
};

struct verdict_rec {
    int32_t ok;      /* every probe of this rank worked */
    int32_t gin_ok;  /* peers through the GIN engine if SHM works */
    int32_t gin_not; /* if it does not */
    int32_t pad;
    struct zn_rma_key key; /* this rank's signal segment (size 0: none) */
};

static const struct zn_transport_rma_ops *shm(void)
{
    return &zn_shm_rma;
}

static ncclResult_t domain(struct ncclComm *c, struct zn_rma *r)
{
    if (!r->shm_dom) ZN_CHECK(shm()->domain_open(&c->tctx, &r->shm_dom));
    return ncclSuccess;
}

/* A peer whose memory this rank could write by cross-memory attach. */
static int shm_candidate(const struct ncclComm *c, int p)
{
    const struct zn_peer_info *me = &c->peers[c->rank], *them = &c->peers[p];
    return p != c->rank && zn_conns_transport(c->conns, p) == &zn_transport_shm &&
           them->host_hash == me->host_hash && me->pid_ns && them->pid_ns == me->pid_ns;
}

/* 1 if this process may read a byte of peer p at addr. A refusal is expected on some systems
 * (Yama's ptrace_scope, containers): it only says so at INFO, and the GIN engine serves. */
static int probe_peer(const struct ncclComm *c, int p, uint64_t addr)
{
    char byte;
    struct iovec l = { &byte, 1 };
    struct iovec rv = { (void *)(uintptr_t)addr, 1 };
    if (process_vm_readv(c->peers[p].pid, &l, 1, &rv, 1, 0) == 1) return 1;
    zn_info(ZN_SHM | ZN_CALL,
            "one-sided: cross-memory attach to rank %d (pid %d) refused (%s): every pair of "
            "this communicator goes through the GIN engine instead",
            p, (int)c->peers[p].pid, strerror(errno));
    return 0;
}

ncclResult_t zn_rma_host_setup(struct zn_rma *r, int *need_gin)
{
    struct ncclComm *c = r->comm;
    int n = c->nranks, me = c->rank, ncand = 0;
    ncclResult_t res;
    struct zn_rma_host *h;
    ZN_CHECK(zn_calloc(&h, 1, "one-sided host state"));
    r->host = h;
    ZN_CHECK(zn_calloc(&h->consumed, r->nwords, "signal counts"));
    ZN_CHECK(zn_calloc(&h->sent, r->nwords, "signal counts"));
    ZN_CHECK(zn_calloc(&h->peer_sig, (size_t)n, "peers' signal words"));
    ZN_CHECK(zn_calloc(&h->ep, (size_t)n, "one-sided connections"));
    for (int p = 0; p < n; p++) ncand += shm_candidate(c, p);

    struct verdict_rec *all;
    size_t rec = sizeof(struct verdict_rec) > sizeof(struct probe_rec) ? sizeof(struct verdict_rec)
                                                                       : sizeof(struct probe_rec);
    ZN_CHECK(zn_calloc_impl((void **)&all, (size_t)n, rec, "one-sided setup"));
    struct verdict_rec *mine = (struct verdict_rec *)((char *)all + (size_t)me * sizeof(*all));
    if (ncand) {
        ZN_CHECK_GOTO(domain(c, r), res, out);
        void *ptr;
        ZN_CHECK_GOTO(shm()->mem_alloc(r->shm_dom, r->nwords * 8, ncand + 1, &ptr, &h->sig_region),
                      res, out);
        h->sig = ptr;
        ZN_CHECK_GOTO(shm()->key_pack(r->shm_dom, h->sig_region, &mine->key), res, out);
    }
    /* Round 1: where each rank's probe word is. */
    struct probe_rec *pr = (struct probe_rec *)all;
    struct verdict_rec key_copy = *mine;
    memset(all, 0, (size_t)n * sizeof(*all));
    pr[me].addr = (uint64_t)(uintptr_t)&h->probe;
    ZN_CHECK_GOTO(zn_boot_allgather(c->boot, pr, sizeof(*pr)), res, out);
    int ok = 1;
    for (int p = 0; p < n && ok; p++)
        if (shm_candidate(c, p)) ok = probe_peer(c, p, pr[p].addr);
    /* Round 2: the verdicts and the segments' keys. */
    memset(all, 0, (size_t)n * sizeof(*all));
    all[me] = key_copy;
    all[me].ok = ok;
    all[me].gin_ok = n - 1 - ncand;
    all[me].gin_not = n - 1;
    ZN_CHECK_GOTO(zn_boot_allgather(c->boot, all, sizeof(*all)), res, out);
    int verdict = 1;
    for (int p = 0; p < n; p++) verdict &= all[p].ok != 0;
    *need_gin = 0;
    for (int p = 0; p < n; p++) *need_gin |= (verdict ? all[p].gin_ok : all[p].gin_not) > 0;
    for (int p = 0; p < n; p++)
        r->path[p] = p == me                          ? ZN_RMA_SELF
                     : verdict && shm_candidate(c, p) ? ZN_RMA_SHM
                                                      : ZN_RMA_GIN;
    if (verdict && ncand) {
        for (int p = 0; p < n; p++)
            if (r->path[p] == ZN_RMA_SHM)
                ZN_CHECK_GOTO(shm()->key_import(r->shm_dom, p, &all[p].key, &h->peer_sig[p]), res,
                              out);
    } else {
        if (h->sig_region) shm()->mem_free(r->shm_dom, h->sig_region);
        h->sig_region = NULL;
        ZN_CHECK_GOTO(zn_calloc(&h->sig, r->nwords, "signal words"), res, out);
    }
    res = ncclSuccess;
out:
    free(all);
    return res;
}

void zn_rma_host_fini(struct zn_rma *r)
{
    struct zn_rma_host *h = r->host;
    if (h) {
        if (!h->sig_region) free(h->sig);
        free(h->peer_sig);
        free(h->ep);
        free(h->sent);
        free(h->consumed);
        free(h);
        r->host = NULL;
    }
    /* Closing the domain closes its connections, unmaps the segments and frees the regions. */
    if (r->shm_dom) shm()->domain_close(r->shm_dom);
    r->shm_dom = NULL;
}

/* --- windows --------------------------------------------------------------------------------- */

ncclResult_t zn_rma_host_win_create(struct ncclComm *comm, void *buf, size_t size,
                                    struct zn_rma_win **out)
{
    struct zn_rma *r;
    ZN_CHECK(zn_rma_state(comm, &r));
    ZN_CHECK(domain(comm, r));
    struct zn_rma_win *w;
    ncclResult_t res;
    ZN_CHECK(zn_calloc(&w, 1, "window keys"));
    w->dom = r->shm_dom;
    w->nranks = comm->nranks;
    ZN_CHECK_GOTO(zn_calloc(&w->keys, (size_t)comm->nranks, "window keys"), res, fail);
    ZN_CHECK_GOTO(zn_calloc(&w->remote, (size_t)comm->nranks, "window keys"), res, fail);
    /* An empty buffer has no key: every put into it is empty (checked by the caller). A
     * buffer that cannot be a region (not mapped throughout) has none either, and puts into
     * it fail saying so: the registration is collective, every rank goes on to the allgather. */
    if (size && (shm()->mem_reg(w->dom, buf, size, &w->region) != ncclSuccess ||
                 shm()->key_pack(w->dom, w->region, &w->keys[comm->rank]) != ncclSuccess))
        memset(&w->keys[comm->rank], 0, sizeof(w->keys[comm->rank]));
    ZN_CHECK_GOTO(zn_boot_allgather(comm->boot, w->keys, sizeof(*w->keys)), res, fail);
    *out = w;
    return ncclSuccess;
fail:
    zn_rma_host_win_destroy(w);
    return res;
}

void zn_rma_host_win_destroy(struct zn_rma_win *w)
{
    if (!w) return;
    for (int p = 0; w->remote && p < w->nranks; p++)
        if (w->remote[p]) shm()->key_release(w->dom, w->remote[p]);
    if (w->region) shm()->mem_dereg(w->dom, w->region);
    free(w->remote);
    free(w->keys);
    free(w);
}

static ncclResult_t win_remote(struct zn_rma *r, struct zn_rma_win *w, int peer, void **out)
{
    if (!w) return zn_error(ncclInternalError, ZN_CALL, "one-sided: a window without its keys");
    if (!w->keys[peer].size)
        return zn_error(ncclInvalidUsage, ZN_CALL,
                        "ncclPutSignal: rank %d's buffer of this window is not reachable by "
                        "cross-memory attach (its registration said why)",
                        peer);
    if (!w->remote[peer])
        ZN_CHECK(shm()->key_import(w->dom, peer, &w->keys[peer], &w->remote[peer]));
    *out = w->remote[peer];
    return ncclSuccess;
}

/* --- puts and signals -------------------------------------------------------------------- */

static ncclResult_t shm_op(struct zn_rma *r, const struct zn_rma_op *op)
{
    struct zn_rma_host *h = r->host;
    int peer = op->peer;
    if (!h->ep[peer]) {
        struct zn_rma_ep_args a = { .peer = peer, .tag = -1 };
        struct zn_rma_key desc;
        ZN_CHECK(shm()->ep_open(r->shm_dom, &a, &h->ep[peer], &desc));
    }
    size_t word = zn_rma_word(r, r->comm->rank, op->ctx, op->sig) * 8;
    uint64_t *sent = &h->sent[zn_rma_word(r, peer, op->ctx, op->sig)];
    ncclResult_t res;
    if (op->kind == ZN_RMA_PUT && op->bytes) {
        void *remote = NULL, *local = NULL;
        ZN_CHECK(win_remote(r, op->win.rma, peer, &remote));
        ZN_CHECK(shm()->mem_reg(r->shm_dom, (void *)op->src, op->bytes, &local));
        res = shm()->put_signal(h->ep[peer], local, 0, remote, op->off, op->bytes,
                                h->peer_sig[peer], word, *sent + 1);
        shm()->mem_dereg(r->shm_dom, local);
    } else {
        res = shm()->signal(h->ep[peer], h->peer_sig[peer], word, *sent + 1);
    }
    if (res == ncclSuccess) ++*sent;
    return res;
}

ncclResult_t zn_rma_host_run(struct zn_rma *r, struct zn_rma_op **ops, int n)
{
    struct zn_rma_host *h = r->host;
    for (int i = 0; i < n; i++) {
        const struct zn_rma_op *op = ops[i];
        switch (r->path[op->peer]) {
        case ZN_RMA_SELF:
            if (op->kind == ZN_RMA_PUT && op->bytes)
                memmove((char *)op->win.buf + op->off, op->src, op->bytes);
            __atomic_fetch_add(&h->sig[zn_rma_word(r, op->peer, op->ctx, op->sig)], 1,
                               __ATOMIC_RELEASE);
            break;
        case ZN_RMA_SHM: ZN_CHECK(shm_op(r, op)); break;
        default:
            ZN_CHECK(
                zn_rma_gin_put(r, op, op->kind == ZN_RMA_PUT ? op->win.dw->view.ginOffset4K : 0));
            break;
        }
    }
    return ncclSuccess;
}

/* --- waits --------------------------------------------------------------------------------- */

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Something about peer p makes the wait hopeless: it exited (SHM: its pidfd; a dead process
 * writes nothing, so its words are looked at once more before it counts), or the engine that
 * carries it failed. */
static ncclResult_t check_peer(struct zn_rma *r, int p, int *suspect)
{
    struct ncclComm *c = r->comm;
    if (r->path[p] == ZN_RMA_GIN) return zn_rma_gin_check(r, "ncclWaitSignal");
    if (r->path[p] != ZN_RMA_SHM || !zn_peer_dead(c->watch, p)) return ncclSuccess;
    if (*suspect != p + 1) {
        *suspect = p + 1;
        return ncclSuccess;
    }
    char who[160];
    zn_peer_str(&c->tctx, p, who, sizeof(who));
    return zn_error(ncclRemoteError, ZN_CALL,
                    "ncclWaitSignal: %s exited or was killed while rank %d waited for its signals",
                    who, c->rank);
}

ncclResult_t zn_rma_host_wait(struct zn_rma *r, const struct zn_rma_want *w, int n)
{
    struct ncclComm *c = r->comm;
    struct zn_rma_host *h = r->host;
    volatile uint64_t *gin = r->gin ? zn_rma_gin_signals(r, 0) : NULL;
    const volatile uint64_t **word = calloc((size_t)n, sizeof(*word));
    uint64_t *last = calloc((size_t)n, sizeof(*last));
    size_t *idx = calloc((size_t)n, sizeof(*idx));
    ncclResult_t res = ncclSuccess;
    if (!word || !last || !idx) {
        res = zn_error(ncclSystemError, ZN_CALL, "out of memory");
        goto out;
    }
    for (int i = 0; i < n; i++) {
        idx[i] = zn_rma_word(r, w[i].peer, w[i].ctx, w[i].sig);
        word[i] = r->path[w[i].peer] == ZN_RMA_GIN && gin ? gin + idx[i] : h->sig + idx[i];
    }
    int64_t progress_at = zn_now_ns(), nap = 0;
    int suspect = 0;
    for (uint64_t polls = 1;; polls++) {
        int done = 1, moved = 0;
        for (int i = 0; i < n; i++) {
            uint64_t v = __atomic_load_n(word[i], __ATOMIC_ACQUIRE);
            moved |= v != last[i];
            last[i] = v;
            done &= v - h->consumed[idx[i]] >= w[i].count;
        }
        if (done) break;
        if (moved) {
            progress_at = zn_now_ns();
            nap = 0;
            suspect = 0;
        }
        if (polls < 2000) {
            cpu_relax();
            continue;
        }
        if ((polls & 63) == 0) {
            if (atomic_load(&c->abort_flag)) {
                res = zn_error(ncclInvalidUsage, ZN_CALL,
                               "ncclWaitSignal: comm %p was aborted while rank %d waited",
                               (void *)c, c->rank);
                goto out;
            }
            for (int i = 0; i < n && res == ncclSuccess; i++)
                if (last[i] - h->consumed[idx[i]] < w[i].count)
                    res = check_peer(r, w[i].peer, &suspect);
            if (res != ncclSuccess) goto out;
            if (zn_now_ns() - progress_at > zn_timeout_ns()) {
                char owed[256] = "";
                size_t len = 0;
                for (int i = 0; i < n && len + 16 < sizeof(owed); i++)
                    if (last[i] - h->consumed[idx[i]] < w[i].count)
                        len += (size_t)snprintf(owed + len, sizeof(owed) - len, "%s%d",
                                                len ? ", " : "", w[i].peer);
                char who[160];
                int first = 0;
                while (first < n && last[first] - h->consumed[idx[first]] >= w[first].count)
                    first++;
                zn_peer_str(&c->tctx, w[first < n ? first : 0].peer, who, sizeof(who));
                res = zn_error(ncclRemoteError, ZN_CALL,
                               "ncclWaitSignal: no signal arrived for ZINC_TIMEOUT=%lld s; rank %d "
                               "still waits for signals of rank(s) %s (first: %s)",
                               (long long)(zn_timeout_ns() / 1000000000), c->rank, owed, who);
                goto out;
            }
        }
        /* A long wait: give the core away, then sleep, up to 1 ms at a time. */
        if (zn_now_ns() - progress_at < 1000000) {
            sched_yield();
        } else {
            nap = nap ? nap * 2 : 20000;
            if (nap > 1000000) nap = 1000000;
            struct timespec ts = { 0, (long)nap };
            nanosleep(&ts, NULL);
        }
    }
    for (int i = 0; i < n; i++) h->consumed[idx[i]] += w[i].count;
out:
    free(word);
    free(last);
    free(idx);
    return res;
}
