/*
 * ncclCommGetUniqueId and ncclCommGrow: a communicator of a parent's ranks, which keep their
 * ranks, and of new ranks, which take [parent size, nRanks). One existing rank, the
 * coordinator, makes the grow id and hands it to the new ranks out of band; the other existing
 * ranks pass NULL.
 *
 *   coordinator      ncclCommGetUniqueId(parent, &id): a bootstrap root in its process, with a
 *                    fresh random magic and job secret (bootstrap/id.c), remembered in
 *                    parent->grow until a grow takes it
 *   existing ranks   ncclCommGrow(parent, n, &id or NULL, -1):
 *                      1. one allgather over the parent's bootstrap of {nRanks, what this rank
 *                         knows of the id it passed, that id}: the others learn the id there
 *                      2. every rank judges the same table the same way (judge below), so they
 *                         all go on or all fail with the same error
 *                      3. zn_boot_init(id, parent rank, n), then the setup every init runs
 *   new ranks        ncclCommGrow(NULL, n, &id, rank): zn_boot_init(id, rank, n), the setup
 *
 * The grown communicator is thus an ordinary one, joined through a root like ncclCommInitRank's
 * (setup.c does everything by kind, host or cuda), whose job secret is the id's new one: only
 * holders of the id can join it or the communicators split from it later. The existing ranks
 * get the id over the parent's bootstrap, whose connections proved the parent's secret (the id
 * travels in the clear there, as it does wherever the application hands it to the new ranks);
 * a stranger who knows the parent's secret but not the id's (a process of the parent's job,
 * say) is refused by the grow root and by every listener of the grown communicator. The root is
 * always in the coordinator's process, so ZINC_COMM_ID plays no part (NCCL refuses
 * ncclCommGetUniqueId when NCCL_COMM_ID is set; zinc has no need to).
 *
 * Rejected: only the new ranks and one existing rank meeting at the root while the existing
 * ranks link up over the parent's bootstrap (NCCL's way). The root would see O(new) ranks
 * instead of O(all), but the ring would be built by two mechanisms under two secrets; the
 * root already serves any number of ranks in O(n) and is what every init is tested with.
 *
 * Single use. parent->grow holds the id handed out and, once a grow took it, that id as used:
 * the coordinator's grow call takes it whatever the verdict (a failed grow leaves a root that
 * cannot serve another), and a second ncclCommGetUniqueId is refused while an id is pending.
 * The existing ranks that pass NULL cannot check the id themselves; they learn what the
 * coordinator knows from the table (judge), so that every existing rank refuses a used id or
 * a foreign one with the same error. (Existing ranks other than the coordinator may pass the
 * id too, as NCCL tolerates: it must then be the coordinator's.) New ranks that pass a used
 * id meet its root, which after its rendezvous answers every rank proving the secret with
 * "used" until its deadline (bootstrap/root.c); later the port is closed and the join times
 * out.
 *
 * Deadlines: the allgather and the join wait ZINC_TIMEOUT at most; the root fails the job
 * ZINC_TIMEOUT after ncclCommGetUniqueId, naming the ranks that never came. If the existing
 * ranks refuse the grow, or the coordinator's communicator is destroyed with its id pending,
 * the coordinator fails the root at once so that the new ranks waiting there learn why.
 *
 * Calls: blocking, non-blocking (ncclInProgress; the work runs on a thread, as a non-blocking
 * init's does) and inside ncclGroupStart/End (the work runs at ncclGroupEnd, several grows on
 * threads of their own, so that one thread may drive several ranks).
 */
#include "group.h"
#include "mgmt.h"
#include "util/clock.h"
#include "util/param.h"
#include "util/thread.h"

#include <stdlib.h>
#include <string.h>

/* A communicator's grow ids (comm->grow). */
struct zn_grow {
    int pending;               /* an id was handed out and no grow took it yet */
    ncclUniqueId id;           /* that id */
    struct zn_boot_root *root; /* its root, while pending */
    int64_t expires;           /* when that root gives up (ZINC_TIMEOUT after it started) */
    int used_any;
    ncclUniqueId used; /* the id the last grow on this communicator took */
};

/* What an existing rank knows of the id it passed. */
enum grow_claim {
    CLAIM_NONE = 0,    /* passed NULL */
    CLAIM_MINE = 1,    /* the id this communicator handed out (the coordinator) */
    CLAIM_USED = 2,    /* an id an earlier grow on this communicator took */
    CLAIM_OTHER = 3,   /* another id: the coordinator's (if every rank passes it), or foreign */
    CLAIM_EXPIRED = 4, /* the id this communicator handed out, but its root gave up waiting */
};

/* One existing rank's entry in the grow's allgather. */
struct grow_rec {
    int32_t nranks;
    int32_t claim;
    ncclUniqueId id; /* MINE and OTHER: the id passed; zeros else */
};

/* The work of one ncclCommGrow call, done now, on a thread or at ncclGroupEnd. */
struct grow_job {
    struct ncclComm *c;      /* the new communicator */
    struct ncclComm *parent; /* existing ranks (busy held until the exchange is over) */
    int nranks;
    enum grow_claim claim;
    ncclUniqueId id;           /* new ranks: theirs; existing ranks: the one passed, if any */
    struct zn_boot_root *root; /* the coordinator: its root, taken from parent->grow */
};

void zn_comm_grow_free(struct ncclComm *c)
{
    struct zn_grow *g = c->grow;
    if (!g) return;
    if (g->pending)
        zn_boot_root_close(g->root, ncclInvalidUsage,
                           "the communicator that made this grow id (ncclCommGetUniqueId) was "
                           "destroyed before any ncclCommGrow used it");
    free(g);
    c->grow = NULL;
}

/* What GetUniqueId and Grow need of a parent: usable, and not busy with a non-blocking call. */
static ncclResult_t parent_ready(struct ncclComm *p, const char *fn)
{
    ZN_CHECK(zn_comm_check_active(p, fn));
    if (atomic_load(&p->revoked))
        return zn_error(ncclInvalidUsage, ZN_INIT,
                        "%s: comm %p was revoked (ncclCommRevoke): it only accepts "
                        "ncclCommDestroy, ncclCommSplit and ncclCommShrink",
                        fn, (void *)p);
    if (zn_comm_init_pending(p) || !p->boot)
        return zn_error(ncclInvalidUsage, ZN_INIT, "%s: comm %p %s", fn, (void *)p,
                        p->boot ? "is still initialising" : "never finished its init");
    ncclResult_t st = (ncclResult_t)atomic_load(&p->async_err);
    if (st != ncclSuccess)
        return zn_error(st == ncclInProgress ? ncclInvalidUsage : st, ZN_INIT, "%s: comm %p is %s",
                        fn, (void *)p,
                        st == ncclInProgress ? "busy (a non-blocking call has not finished)"
                                             : "in an error state");
    return ncclSuccess;
}

ZN_API(ncclResult_t, ncclCommGetUniqueId, ncclComm_t comm, ncclUniqueId *uniqueId)
{
    zn_params();
    ZN_CHECK(parent_ready(comm, "ncclCommGetUniqueId"));
    if (!uniqueId)
        return zn_error(ncclInvalidArgument, ZN_INIT, "ncclCommGetUniqueId: uniqueId is NULL");
    struct zn_grow *g = comm->grow;
    if (g && g->pending && zn_now_ns() > g->expires) {
        /* Its root gave up at its deadline (and told whoever had joined): nothing to keep. */
        zn_info(ZN_INIT, "ncclCommGetUniqueId: the previous grow id expired unused");
        zn_boot_root_release(g->root);
        g->root = NULL;
        g->pending = 0;
    }
    if (g && g->pending)
        return zn_error(ncclInvalidUsage, ZN_INIT,
                        "ncclCommGetUniqueId: comm %p (rank %d) handed out a grow id that no "
                        "ncclCommGrow has used yet: each id serves one grow, and the next one is "
                        "made after that grow",
                        (void *)comm, comm->rank);
    if (!g) {
        g = comm->grow = calloc(1, sizeof(*comm->grow));
        if (!g) return zn_error(ncclSystemError, ZN_INIT, "ncclCommGetUniqueId: out of memory");
    }
    ncclUniqueId id;
    int64_t expires = zn_now_ns() + zn_timeout_ns();
    ZN_CHECK(zn_boot_get_grow_id(comm->nranks, &id, &g->root));
    g->id = id;
    g->expires = expires;
    g->pending = 1;
    *uniqueId = id;
    zn_info(ZN_INIT, "ncclCommGetUniqueId: comm %p rank %d made a grow id for %d ranks",
            (void *)comm, comm->rank, comm->nranks);
    return ncclSuccess;
}

/* Every existing rank reaches the same verdict from the same table; *coord is the coordinator
 * (-1 if none). */
static ncclResult_t judge(const struct grow_rec *t, int n, int *coord)
{
    *coord = -1;
    int other = -1, mine = 0;
    for (int r = 0; r < n; r++) {
        if (t[r].nranks != t[0].nranks)
            return zn_error(ncclInvalidArgument, ZN_INIT,
                            "ncclCommGrow: rank 0 passed nRanks %d but rank %d passed %d: every "
                            "rank passes the same",
                            t[0].nranks, r, t[r].nranks);
        if (t[r].claim == CLAIM_USED)
            return zn_error(ncclInvalidUsage, ZN_INIT,
                            "ncclCommGrow: rank %d passed a uniqueId that an earlier ncclCommGrow "
                            "of this communicator used: an id from ncclCommGetUniqueId serves one "
                            "grow (call it again for another)",
                            r);
        if (t[r].claim == CLAIM_EXPIRED)
            return zn_error(ncclInvalidUsage, ZN_INIT,
                            "ncclCommGrow: rank %d passed a grow id whose root gave up: more than "
                            "ZINC_TIMEOUT passed since ncclCommGetUniqueId made it",
                            r);
        if (t[r].claim == CLAIM_MINE && mine++ == 0) *coord = r;
        if (t[r].claim == CLAIM_MINE && mine > 1)
            return zn_error(ncclInvalidUsage, ZN_INIT,
                            "ncclCommGrow: ranks %d and %d each passed an id of their own "
                            "ncclCommGetUniqueId: a grow has one coordinator, whose id every "
                            "other rank leaves to it (NULL)",
                            *coord, r);
        if (t[r].claim == CLAIM_OTHER && other < 0) other = r;
    }
    if (*coord < 0 && other >= 0)
        return zn_error(ncclInvalidArgument, ZN_INIT,
                        "ncclCommGrow: rank %d passed a uniqueId that no rank of this "
                        "communicator made with ncclCommGetUniqueId (an id of ncclGetUniqueId or "
                        "of another communicator cannot grow it)",
                        other);
    if (*coord < 0)
        return zn_error(ncclInvalidUsage, ZN_INIT,
                        "ncclCommGrow: no rank passed the uniqueId: the rank that called "
                        "ncclCommGetUniqueId passes it, the other existing ranks NULL");
    for (int r = 0; r < n; r++)
        if (t[r].claim == CLAIM_OTHER && memcmp(&t[r].id, &t[*coord].id, sizeof(t[r].id)) != 0)
            return zn_error(ncclInvalidArgument, ZN_INIT,
                            "ncclCommGrow: rank %d passed a uniqueId other than the one rank %d "
                            "made with ncclCommGetUniqueId",
                            r, *coord);
    return ncclSuccess;
}

/* Existing ranks: agree on the grow over the parent and learn the id (into *id). */
static ncclResult_t exchange(struct grow_job *j, ncclUniqueId *id)
{
    struct ncclComm *p = j->parent;
    int n = p->nranks;
    struct grow_rec *t = calloc((size_t)n, sizeof(*t));
    if (!t) return zn_error(ncclSystemError, ZN_INIT, "ncclCommGrow: out of memory");
    t[p->rank].nranks = j->nranks;
    t[p->rank].claim = j->claim;
    if (j->claim == CLAIM_MINE || j->claim == CLAIM_OTHER) t[p->rank].id = j->id;
    ncclResult_t res = zn_boot_allgather(p->boot, t, sizeof(*t));
    int coord = -1;
    if (res == ncclSuccess) res = judge(t, n, &coord);
    if (res == ncclSuccess) *id = t[coord].id;
    free(t);
    return res;
}

/* The coordinator lets its root serve the grow, or fails it with the reason the grow stopped
 * (new ranks waiting there learn it at once). */
static void settle_root(struct grow_job *j, ncclResult_t res)
{
    if (!j->root) return;
    if (res == ncclSuccess)
        zn_boot_root_release(j->root);
    else
        zn_boot_root_close(j->root, res == ncclInProgress ? ncclInvalidUsage : res,
                           zn_last_error()[0] ? zn_last_error()
                                              : "the existing ranks did not complete the grow");
    j->root = NULL;
}

static void parent_done(struct grow_job *j)
{
    if (!j->parent) return;
    atomic_fetch_sub(&j->parent->busy, 1);
    j->parent = NULL;
}

/* The whole grow of one rank; the new communicator's state ends as its result. */
static ncclResult_t grow_run(struct grow_job *j)
{
    struct ncclComm *c = j->c;
    struct zn_join join = { .id = j->id };
    ncclResult_t res = ncclSuccess;
    zn_log_rank = c->rank;
    if (j->parent) {
        res = exchange(j, &join.id);
        settle_root(j, res);
        parent_done(j);
    }
    if (res != ncclSuccess) {
        zn_comm_save_error(c);
        atomic_store(&c->async_err, res);
        return res;
    }
    zn_info(ZN_INIT, "ncclCommGrow: rank %d of %d%s joins the grown communicator", c->rank,
            c->nranks, j->claim == CLAIM_MINE ? " (the coordinator)" : "");
    return zn_comm_setup(c, &join);
}

/* A job that never runs (its group was dropped, or no thread could be started). */
static void grow_drop(struct grow_job *j, ncclResult_t res)
{
    settle_root(j, res);
    parent_done(j);
    zn_comm_save_error(j->c);
    atomic_store(&j->c->async_err, res);
    free(j);
}

static void *grow_main(void *arg)
{
    struct grow_job *j = arg;
    struct ncclComm *c = j->c;
    grow_run(j);
    free(j);
    /* The last touch of c: a waiter may free it as soon as it holds the lock. */
    pthread_mutex_lock(&c->init_lock);
    atomic_store(&c->init_running, 0);
    pthread_cond_broadcast(&c->init_cond);
    pthread_mutex_unlock(&c->init_lock);
    return NULL;
}

/* Run j on a thread of its own (non-blocking): ncclInProgress, or the error. */
static ncclResult_t grow_start(struct grow_job *j)
{
    struct ncclComm *c = j->c;
    atomic_store(&c->init_running, 1);
    int err = zn_thread_start_detached(grow_main, j);
    if (!err) return ncclInProgress;
    atomic_store(&c->init_running, 0);
    ncclResult_t res = zn_error(ncclSystemError, ZN_INIT, "ncclCommGrow: cannot start a thread: %s",
                                strerror(err));
    grow_drop(j, res);
    return res;
}

/* At ncclGroupEnd (run), or when the group was dropped. */
static ncclResult_t grow_deferred(void *arg, int run)
{
    struct grow_job *j = arg;
    if (!run) {
        grow_drop(j, zn_error(ncclInvalidUsage, ZN_INIT,
                              "ncclCommGrow: its group failed before ncclGroupEnd ran it"));
        return ncclSuccess;
    }
    if (!j->c->config.blocking) {
        ncclResult_t res = grow_start(j);
        return res == ncclInProgress ? ncclSuccess : res;
    }
    ncclResult_t res = grow_run(j);
    free(j);
    return res;
}

/* An existing rank's checks. */
static ncclResult_t existing_rank(struct ncclComm *p, int nRanks, int rank)
{
    ZN_CHECK(parent_ready(p, "ncclCommGrow"));
    if (rank != -1)
        return zn_error(ncclInvalidArgument, ZN_INIT,
                        "ncclCommGrow: rank %d: existing ranks (comm not NULL) pass rank -1 and "
                        "keep their rank (%d)",
                        rank, p->rank);
    if (nRanks <= p->nranks)
        return zn_error(ncclInvalidArgument, ZN_INIT,
                        "ncclCommGrow: nRanks %d must be larger than the communicator's %d ranks",
                        nRanks, p->nranks);
    return ncclSuccess;
}

/* What an existing rank knows of the id it passed. The coordinator takes the id's root over:
 * the id is used from here on, whatever the grow's verdict. */
static void existing_claim(struct ncclComm *p, const ncclUniqueId *id, struct grow_job *j)
{
    struct zn_grow *g = p->grow;
    j->claim = CLAIM_NONE;
    if (!id) return;
    j->id = *id;
    if (g && g->pending && !memcmp(&g->id, id, sizeof(*id))) {
        j->claim = zn_now_ns() > g->expires ? CLAIM_EXPIRED : CLAIM_MINE;
        j->root = g->root;
        g->root = NULL;
        g->pending = 0;
        g->used = *id;
        g->used_any = 1;
    } else if (g && g->used_any && !memcmp(&g->used, id, sizeof(*id))) {
        j->claim = CLAIM_USED;
    } else {
        j->claim = CLAIM_OTHER;
    }
}

static ncclResult_t new_rank(int nRanks, const ncclUniqueId *id, int rank)
{
    if (!id)
        return zn_error(ncclInvalidArgument, ZN_INIT,
                        "ncclCommGrow: comm and uniqueId are both NULL: new ranks pass the id "
                        "from ncclCommGetUniqueId, existing ranks their communicator");
    int parent = zn_boot_grow_id_parent(id);
    if (parent < 0)
        return zn_error(ncclInvalidArgument, ZN_INIT,
                        "ncclCommGrow: uniqueId was not made by ncclCommGetUniqueId (an id of "
                        "ncclGetUniqueId cannot grow a communicator)");
    if (nRanks <= parent)
        return zn_error(ncclInvalidArgument, ZN_INIT,
                        "ncclCommGrow: nRanks %d must be larger than the grown communicator's %d "
                        "ranks",
                        nRanks, parent);
    if (rank < parent || rank >= nRanks)
        return zn_error(ncclInvalidArgument, ZN_INIT,
                        "ncclCommGrow: rank %d: a new rank (comm NULL) takes one of %d..%d (the "
                        "first %d are the existing ranks')",
                        rank, parent, nRanks - 1, parent);
    return ncclSuccess;
}

ZN_API(ncclResult_t, ncclCommGrow, ncclComm_t comm, int nRanks, const ncclUniqueId *uniqueId,
       int rank, ncclComm_t *newcomm, ncclConfig_t *config)
{
    zn_params();
    if (!newcomm) return zn_error(ncclInvalidArgument, ZN_INIT, "ncclCommGrow: newcomm is NULL");
    *newcomm = NULL;
    if (nRanks < 1)
        return zn_error(ncclInvalidArgument, ZN_INIT, "ncclCommGrow: nRanks %d", nRanks);
    struct grow_job *j = calloc(1, sizeof(*j));
    if (!j) return zn_error(ncclSystemError, ZN_INIT, "ncclCommGrow: out of memory");
    j->nranks = nRanks;
    ncclConfig_t cfg;
    enum zn_comm_kind kind = ZN_COMM_HOST;
    int dev = -1, me = rank;
    ncclResult_t res;
    if (comm) {
        res = existing_rank(comm, nRanks, rank);
        /* The parent's config when none is passed, else the one passed (NCCL's rule). */
        if (res == ncclSuccess) {
            cfg = comm->config;
            if (config) res = zn_config_apply(config, &cfg);
        }
        if (res == ncclSuccess) {
            existing_claim(comm, uniqueId, j);
            kind = comm->kind;
            dev = comm->cuda_dev;
            me = comm->rank;
        }
    } else {
        res = new_rank(nRanks, uniqueId, rank);
        if (res == ncclSuccess) res = zn_config_apply(config, &cfg);
        /* The kind and device of the calling thread, as for ncclCommInitRank. */
        if (res == ncclSuccess) res = zn_comm_pick_kind(&kind, &dev);
        if (res == ncclSuccess) j->id = *uniqueId;
    }
    if (res == ncclSuccess) res = zn_comm_alloc(nRanks, me, &cfg, &j->c);
    if (res != ncclSuccess) {
        settle_root(j, res);
        free(j);
        return res;
    }
    struct ncclComm *c = j->c;
    c->kind = kind;
    c->cuda_dev = dev;
    if (comm) {
        atomic_fetch_add(&comm->busy, 1);
        j->parent = comm;
    }
    zn_info(ZN_INIT, "ncclCommGrow: %s rank %d, %d ranks in all%s", comm ? "existing" : "new", me,
            nRanks, zn_group_depth() > 0 ? " (at ncclGroupEnd)" : "");
    if (zn_group_depth() > 0) {
        res = zn_group_defer(c, grow_deferred, j);
        if (res != ncclSuccess) { /* grow_deferred dropped j */
            zn_comm_free(c);
            return res;
        }
        *newcomm = c;
        return cfg.blocking ? ncclSuccess : ncclInProgress;
    }
    if (!cfg.blocking) {
        res = grow_start(j);
        if (res != ncclInProgress) { /* grow_start dropped j */
            zn_comm_free(c);
            return res;
        }
        *newcomm = c;
        return ncclInProgress;
    }
    res = grow_run(j);
    free(j);
    if (res != ncclSuccess) {
        if (comm) zn_comm_save_error(comm);
        zn_comm_free(c);
        return res;
    }
    *newcomm = c;
    return ncclSuccess;
}
