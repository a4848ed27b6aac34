/*
 * ncclCommRevoke, and the background jobs of non-blocking management calls.
 *
 * Revoking sets the communicator's abort flag, which every collective and send/recv watches
 * (executor, transports): calls in flight on other threads fail at once and tell their peers,
 * and later ones fail before they start. The flag stays set for good. The bootstrap, which
 * split and shrink still need, is switched to a flag of its own (boot_abort) once no call
 * uses the communicator any more; that moment is "quiescent", when the state moves from
 * ncclInProgress to ncclSuccess.
 *
 * Rejected: clearing the abort flag once quiescent. The interrupted calls left the transports
 * out of step with the peers (half-sent messages, arena counters), so a later collective could
 * mix with old data; refusing collectives on a revoked communicator is the only safe answer.
 */
#include "group.h"
#include "mgmt.h"
#include "util/clock.h"
#include "util/thread.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

struct job {
    struct ncclComm *comm;
    ncclResult_t (*fn)(struct ncclComm *);
};

static void *job_main(void *arg)
{
    struct job *j = arg;
    struct ncclComm *c = j->comm;
    ncclResult_t (*fn)(struct ncclComm *) = j->fn;
    free(j);
    zn_log_rank = c->rank;
    ncclResult_t res = fn(c);
    if (res != ncclSuccess) zn_comm_save_error(c);
    atomic_store(&c->async_err, res);
    /* The last access: destroy may free the communicator as soon as busy drops. */
    atomic_fetch_sub(&c->busy, 1);
    return NULL;
}

ncclResult_t zn_comm_run_async(struct ncclComm *c, ncclResult_t (*fn)(struct ncclComm *),
                               const char *what)
{
    struct job *j = malloc(sizeof(*j));
    if (!j) return zn_error(ncclSystemError, ZN_CALL, "%s: out of memory", what);
    *j = (struct job){ .comm = c, .fn = fn };
    atomic_store(&c->async_err, ncclInProgress);
    atomic_fetch_add(&c->busy, 1);
    int err = zn_thread_start_detached(job_main, j);
    if (err) {
        free(j);
        atomic_fetch_sub(&c->busy, 1);
        ncclResult_t res = zn_error(ncclSystemError, ZN_CALL, "%s: cannot start a thread: %s", what,
                                    strerror(err));
        zn_comm_save_error(c);
        atomic_store(&c->async_err, res);
        return res;
    }
    return ncclInProgress;
}

ncclResult_t zn_comm_wait_quiet(struct ncclComm *c, int own, const char *fn)
{
    int64_t deadline = zn_now_ns() + zn_timeout_ns();
    while (atomic_load(&c->busy) > own) {
        if (zn_now_ns() > deadline)
            return zn_error(ncclInternalError, ZN_CALL,
                            "%s: %d call(s) on comm %p on other threads did not return within "
                            "ZINC_TIMEOUT after it was revoked",
                            fn, atomic_load(&c->busy) - own, (void *)c);
        struct timespec ts = { 0, 100000 };
        nanosleep(&ts, NULL);
    }
    return ncclSuccess;
}

/* Stop everything in flight; the state stays ncclInProgress until revoke_finish. */
static void revoke_start(struct ncclComm *c)
{
    atomic_store(&c->revoked, 1);
    atomic_store(&c->async_err, ncclInProgress);
    atomic_store(&c->abort_flag, 1);
    /* GPU kernels of a cuda communicator watch their own (host-mapped) abort word. */
    if (c->host_words) ((volatile uint32_t *)c->host_words)[0] = 1;
    zn_info(ZN_INIT, "comm %p rank %d revoked", (void *)c, c->rank);
}

/* Quiescent: the bootstrap serves management calls again. */
static void revoke_finish(struct ncclComm *c)
{
    if (c->boot) zn_boot_reopen(c->boot, &c->boot_abort);
}

ncclResult_t zn_comm_revoke_sync(struct ncclComm *c, const char *fn)
{
    revoke_start(c);
    ncclResult_t res = zn_comm_wait_quiet(c, 0, fn);
    if (res != ncclSuccess) {
        zn_comm_save_error(c);
        atomic_store(&c->async_err, res);
        return res;
    }
    revoke_finish(c);
    atomic_store(&c->async_err, ncclSuccess);
    return ncclSuccess;
}

/* The background half of a non-blocking revoke: it is one of the calls using c itself. */
static ncclResult_t revoke_job(struct ncclComm *c)
{
    ZN_CHECK(zn_comm_wait_quiet(c, 1, "ncclCommRevoke"));
    revoke_finish(c);
    return ncclSuccess;
}

ZN_API(ncclResult_t, ncclCommRevoke, ncclComm_t comm, int revokeFlags)
{
    ZN_CHECK(zn_comm_check(comm, "ncclCommRevoke"));
    if (revokeFlags != NCCL_REVOKE_DEFAULT)
        return zn_error(ncclInvalidArgument, ZN_CALL,
                        "ncclCommRevoke: revokeFlags 0x%x must be NCCL_REVOKE_DEFAULT (0)",
                        (unsigned)revokeFlags);
    if (zn_comm_init_pending(comm))
        return zn_error(ncclInvalidUsage, ZN_CALL,
                        "ncclCommRevoke: comm %p is still initialising (non-blocking init): wait "
                        "for ncclCommGetAsyncError to leave ncclInProgress, or use ncclCommAbort",
                        (void *)comm);
    /* Revoking twice is harmless: the state already says where the first one is. */
    if (atomic_load(&comm->revoked))
        return atomic_load(&comm->async_err) == ncclInProgress ? ncclInProgress : ncclSuccess;
    if (comm->config.blocking) return zn_comm_revoke_sync(comm, "ncclCommRevoke");
    revoke_start(comm);
    return zn_comm_run_async(comm, revoke_job, "ncclCommRevoke");
}
