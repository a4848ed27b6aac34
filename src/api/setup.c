/*
 * Communicator setup: join (bootstrap), exchange peer info, find the hosts, connect the
 * transports, map the shared-memory arena, and fill the views the lower layers get.
 */
#include "comm.h"
#include "util/clock.h"
#include "util/param.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

ncclResult_t zn_config_apply(const ncclConfig_t *user, ncclConfig_t *out)
{
    ncclConfig_t def = NCCL_CONFIG_INITIALIZER;
    *out = def;
    if (!user) {
        out->blocking = 1;
        return ncclSuccess;
    }
    if (user->magic != 0xcafebeef)
        return zn_error(ncclInvalidArgument, ZN_INIT,
                        "config was not initialised with NCCL_CONFIG_INITIALIZER (magic 0x%x)",
                        user->magic);
    if (user->size < offsetof(ncclConfig_t, blocking) + sizeof(int) || user->size > 4096)
        return zn_error(ncclInvalidArgument, ZN_INIT, "config size %zu is not valid", user->size);
    /* Older (smaller) config structs are accepted: copy what they have. */
    memcpy(out, user, user->size < sizeof(*out) ? user->size : sizeof(*out));
    out->size = sizeof(*out);
    if (out->blocking == NCCL_CONFIG_UNDEF_INT) out->blocking = 1;
    if (out->blocking != 0 && out->blocking != 1)
        return zn_error(ncclInvalidArgument, ZN_INIT, "config.blocking must be 0 or 1 (got %d)",
                        out->blocking);
    return ncclSuccess;
}

ncclResult_t zn_comm_alloc(int nranks, int rank, const ncclConfig_t *config, struct ncclComm **out)
{
    struct ncclComm *c = calloc(1, sizeof(*c));
    if (!c) return zn_error(ncclSystemError, ZN_INIT, "out of memory for a communicator");
    c->magic = ZN_COMM_MAGIC;
    c->rank = rank;
    c->nranks = nranks;
    c->config = *config;
    c->cuda_dev = -1;
    atomic_init(&c->async_err, ncclInProgress);
    pthread_mutex_init(&c->err_lock, NULL);
    *out = c;
    return ncclSuccess;
}

ncclResult_t zn_comm_check(const struct ncclComm *comm, const char *fn)
{
    if (!comm) return zn_error(ncclInvalidArgument, ZN_CALL, "%s: comm is NULL", fn);
    if (comm->magic != ZN_COMM_MAGIC)
        return zn_error(ncclInvalidArgument, ZN_CALL,
                        "%s: comm %p is not a communicator (destroyed, or never initialised?)", fn,
                        (const void *)comm);
    return ncclSuccess;
}

void zn_comm_set_error(struct ncclComm *comm, ncclResult_t err)
{
    int expected = ncclSuccess;
    atomic_compare_exchange_strong(&comm->async_err, &expected, (int)err);
    zn_comm_save_error(comm);
}

void zn_comm_save_error(struct ncclComm *comm)
{
    pthread_mutex_lock(&comm->err_lock);
    snprintf(comm->last_error, sizeof(comm->last_error), "%s", zn_last_error());
    pthread_mutex_unlock(&comm->err_lock);
}

/* Hosts: index of each rank's host, in order of first appearance; ring order puts the ranks of
 * one host next to each other, so a ring crosses between hosts only nhosts times. */
static ncclResult_t topology(struct ncclComm *c)
{
    int n = c->nranks;
    int *host = malloc((size_t)n * sizeof(int));
    c->ring = malloc((size_t)n * sizeof(int));
    if (!host || !c->ring) {
        free(host);
        return zn_error(ncclSystemError, ZN_INIT, "out of memory");
    }
    c->nhosts = 0;
    for (int r = 0; r < n; r++) {
        host[r] = -1;
        for (int q = 0; q < r; q++)
            if (c->peers[q].host_hash == c->peers[r].host_hash) {
                host[r] = host[q];
                break;
            }
        if (host[r] < 0) host[r] = c->nhosts++;
    }
    int k = 0;
    c->nlocal = 0;
    for (int h = 0; h < c->nhosts; h++)
        for (int r = 0; r < n; r++)
            if (host[r] == h) c->ring[k++] = r;
    for (int r = 0; r < n; r++) {
        if (host[r] == host[c->rank]) c->nlocal++;
        if (c->ring[r] == c->rank) c->actx.ring_pos = r;
    }
    free(host);
    return ncclSuccess;
}

static int arena_allowed(const struct ncclComm *c)
{
    const struct zn_params *p = zn_params();
    return c->nhosts == 1 && c->nranks >= 2 && !p->shm_disable &&
           strcmp(p->transport, "socket") != 0 && c->kind == ZN_COMM_HOST;
}

static ncclResult_t join(struct ncclComm *c, struct zn_join *j)
{
    ncclResult_t res;
    if (j->from_addrs)
        res = zn_boot_init_addrs(j->magic, c->rank, c->nranks, &j->listener, j->addrs,
                                 &c->abort_flag, &c->boot);
    else
        res = zn_boot_init(&j->id, c->rank, c->nranks, &c->abort_flag, &c->boot);
    free(j->addrs);
    j->addrs = NULL;
    return res;
}

static ncclResult_t exchange_peers(struct ncclComm *c)
{
    c->peers = calloc((size_t)c->nranks, sizeof(*c->peers));
    if (!c->peers) return zn_error(ncclSystemError, ZN_INIT, "out of memory");
    ZN_CHECK(zn_peer_info_local(&c->peers[c->rank]));
    c->peers[c->rank].rank = c->rank;
    c->peers[c->rank].cuda_dev = c->cuda_dev;
    ZN_CHECK(zn_boot_allgather(c->boot, c->peers, sizeof(*c->peers)));
    c->comm_hash = (zn_boot_magic(c->boot) ^ c->peers[0].nonce) * 0x9e3779b97f4a7c15ull;
    c->comm_hash ^= c->comm_hash >> 29;
    c->tctx = (struct zn_tctx){ .rank = c->rank,
                                .nranks = c->nranks,
                                .peers = c->peers,
                                .boot = c->boot,
                                .comm_hash = c->comm_hash,
                                .abort_flag = &c->abort_flag };
    return ncclSuccess;
}

/* Rank 0 makes the arena, then everyone learns whether that worked before mapping it, so a
 * failure on rank 0 (a full /dev/shm) fails every rank at once instead of at the deadline. */
static ncclResult_t setup_arena(struct ncclComm *c)
{
    int ok = 1;
    ncclResult_t res = ncclSuccess;
    size_t slot = (size_t)zn_params()->shm_slot_size;
    if (c->rank == 0) {
        res = zn_arena_create(&c->tctx, slot, &c->arena);
        ok = res == ncclSuccess;
    }
    int *all = calloc((size_t)c->nranks, sizeof(int));
    if (!all) return zn_error(ncclSystemError, ZN_INIT, "out of memory");
    all[c->rank] = ok;
    ncclResult_t gres = zn_boot_allgather(c->boot, all, sizeof(int));
    int root_ok = all[0];
    free(all);
    if (res != ncclSuccess) return res;
    ZN_CHECK(gres);
    if (!root_ok) {
        char who[128];
        zn_peer_str(&c->tctx, 0, who, sizeof(who));
        return zn_error(ncclRemoteError, ZN_INIT,
                        "%s could not create the shared-memory arena (see its log)", who);
    }
    if (c->rank != 0) ZN_CHECK(zn_arena_create(&c->tctx, slot, &c->arena));
    return ncclSuccess;
}

static void fill_views(struct ncclComm *c)
{
    const struct zn_params *p = zn_params();
    c->actx.rank = c->rank;
    c->actx.nranks = c->nranks;
    c->actx.nhosts = c->nhosts;
    c->actx.ring = c->ring;
    c->actx.arena = c->arena;
    c->actx.chunk_size = p->chunk_size > 0 ? (size_t)p->chunk_size : 512 * 1024;
    c->actx.shm_transport = zn_conns_uses_shm(c->conns);
    c->cx = (struct zn_exec_comm){ .tctx = &c->tctx,
                                   .conns = c->conns,
                                   .arena = c->arena,
                                   .watch = c->watch,
                                   .actx = &c->actx,
                                   .abort_flag = &c->abort_flag,
                                   .force_algo = *p->algo ? p->algo : NULL,
                                   .nlocal = c->nlocal };
}

ncclResult_t zn_comm_setup(struct ncclComm *c, struct zn_join *j)
{
    int64_t t0 = zn_now_ns();
    zn_log_rank = c->rank;
    ncclResult_t res;
    ZN_CHECK_GOTO(join(c, j), res, fail);
    ZN_CHECK_GOTO(exchange_peers(c), res, fail);
    ZN_CHECK_GOTO(topology(c), res, fail);
    ZN_CHECK_GOTO(zn_conns_create(&c->tctx, &c->conns), res, fail);
    if (arena_allowed(c)) ZN_CHECK_GOTO(setup_arena(c), res, fail);
    ZN_CHECK_GOTO(zn_peer_watch_create(&c->tctx, &c->watch), res, fail);
    fill_views(c);
    /* Nobody starts a collective before every rank finished its setup. */
    ZN_CHECK_GOTO(zn_boot_barrier(c->boot), res, fail);
    zn_info(ZN_INIT, "comm %p rank %d/%d %s: %d host(s), %d local rank(s), %s, ready in %.1f ms",
            (void *)c, c->rank, c->nranks, c->kind == ZN_COMM_HOST ? "host" : "cuda", c->nhosts,
            c->nlocal, c->arena ? "shm arena" : "no arena", (zn_now_ns() - t0) / 1e6);
    atomic_store(&c->async_err, ncclSuccess);
    return ncclSuccess;
fail:
    if (c->boot) zn_boot_abort(c->boot, res, zn_last_error());
    zn_comm_set_error(c, res);
    atomic_store(&c->async_err, res);
    return res;
}

struct setup_job {
    struct ncclComm *comm;
    struct zn_join join;
};

static void *setup_main(void *arg)
{
    struct setup_job *job = arg;
    struct ncclComm *c = job->comm;
    zn_comm_setup(c, &job->join);
    free(job);
    atomic_store(&c->init_running, 0);
    return NULL;
}

ncclResult_t zn_comm_setup_async(struct ncclComm *comm, struct zn_join *j)
{
    struct setup_job *job = malloc(sizeof(*job));
    if (!job) return zn_error(ncclSystemError, ZN_INIT, "out of memory");
    job->comm = comm;
    job->join = *j;
    j->addrs = NULL;
    atomic_store(&comm->init_running, 1);
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int err = pthread_create(&t, &attr, setup_main, job);
    pthread_attr_destroy(&attr);
    if (err) {
        atomic_store(&comm->init_running, 0);
        free(job->join.addrs);
        free(job);
        return zn_error(ncclSystemError, ZN_INIT, "cannot start an init thread: %s", strerror(err));
    }
    return ncclSuccess;
}

void zn_comm_wait_setup(struct ncclComm *comm)
{
    while (atomic_load(&comm->init_running)) {
        struct timespec ts = { 0, 200000 };
        nanosleep(&ts, NULL);
    }
}

void zn_comm_free(struct ncclComm *c)
{
    if (!c) return;
    zn_peer_watch_destroy(c->watch);
    zn_arena_destroy(c->arena);
    zn_conns_destroy(c->conns);
    zn_exec_comm_fini(&c->cx);
    zn_boot_destroy(c->boot);
    free(c->peers);
    free(c->ring);
    free(c->ops);
    pthread_mutex_destroy(&c->err_lock);
    c->magic = 0;
    free(c);
}

ncclResult_t zn_comm_pick_kind(enum zn_comm_kind *kind, int *dev)
{
    const char *want = zn_params()->device;
    *dev = -1;
    *kind = ZN_COMM_HOST;
    if (!strcmp(want, "cuda"))
        return zn_error(ncclInvalidUsage, ZN_INIT,
                        "ZINC_DEVICE=cuda: cuda communicators are not implemented in this build "
                        "yet (see the README feature table); use ZINC_DEVICE=host");
    if (strcmp(want, "auto") && strcmp(want, "host"))
        return zn_error(ncclInvalidArgument, ZN_INIT,
                        "ZINC_DEVICE=%s is not one of auto, host, cuda", want);
    return ncclSuccess;
}
