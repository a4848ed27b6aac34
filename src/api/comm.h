/*
 * The communicator (api layer). Everything below it sees only narrow views: the bootstrap,
 * the transport context, the algorithm context and the executor's context.
 */
#ifndef ZN_API_COMM_H
#define ZN_API_COMM_H

#include "algo/algo.h"
#include "bootstrap/bootstrap.h"
#include "exec/cuda_exec.h"
#include "exec/exec.h"
#include "transport/conns.h"
#include "transport/gpu_peer.h"
#include "transport/peer.h"
#include "transport/shm_arena.h"
#include "util/err.h"
#include "util/handle.h"

#include <pthread.h>
#include <stdatomic.h>

#define ZN_COMM_MAGIC 0x7a696e63636f6d6dull /* "zinccomm" */

enum zn_comm_kind { ZN_COMM_HOST = 0, ZN_COMM_CUDA = 1 };

/* A reduction op made by ncclRedOpCreatePreMulSum. */
struct zn_user_op {
    int used;
    ncclDataType_t dtype;
    ncclScalarResidence_t residence;
    uint64_t value;  /* ncclScalarHostImmediate: the scalar, read at creation */
    const void *ptr; /* ncclScalarDevice: read at each call */
};

struct ncclComm {
    uint64_t magic;
    int rank, nranks;
    enum zn_comm_kind kind;
    int cuda_dev;
    ncclConfig_t config;

    struct zn_boot *boot;
    struct zn_peer_info *peers;
    struct zn_tctx tctx;
    struct zn_conns *conns;
    struct zn_arena *arena;
    struct zn_peer_watch *watch;
    int *ring;
    struct zn_algo_ctx actx;
    struct zn_exec_comm exec;
    uint64_t comm_hash;
    int nlocal, nhosts;

    /* cuda communicators */
    struct zn_p2p *p2p;      /* GPU arenas: every peer's, or the ring neighbours' (ring mode) */
    struct zn_cuda_ctx cuda; /* the CUDA executor's view */
    void *host_words;        /* pinned, mapped: [0] abort flag, [1] kernel error */
    void *p2p_state;         /* zn_transport_p2p's state (full p2p mode: registrations), or NULL */
    int proxy_held;          /* holds a reference on the process's proxy (zn_proxy_acquire) */
    int staged; /* the staged path exists: for everything (no GPU ring), or in ring mode for
                   what the ring kernels do not do */

    atomic_int abort_flag;
    atomic_int busy;      /* API calls currently using the communicator */
    atomic_int async_err; /* ncclResult_t: ncclInProgress while a non-blocking init runs */
    atomic_int init_running;
    /* init_running drops under init_lock with a broadcast: waiters sleep instead of polling
     * (hundreds of ranks polling on a few cores starve the init threads they wait for). */
    pthread_mutex_t init_lock;
    pthread_cond_t init_cond;
    int finalized;
    uint64_t split_count;
    char last_error[ZN_ERRMSG_MAX];
    pthread_mutex_t err_lock;

    struct zn_user_op *ops;
    int nops;

    /* Management after init (revoke.c, shrink.c, window.c, finalize in lifecycle.c). A revoked
     * communicator keeps abort_flag set, so collectives and send/recv fail at once, while its
     * bootstrap watches boot_abort instead and still serves split and shrink. */
    atomic_int revoked;
    atomic_int boot_abort;
    struct zn_window *windows; /* registered by ncclCommWindowRegister */
    /* The NCCL 2.29-2.30 features, each owned by its file: the grow id handed out and not yet
     * consumed (grow.c), what ncclCommSuspend freed (suspend.c; suspended is 1 from suspend
     * to resume), the signal counters and connections of ncclPutSignal (rma.c). */
    struct zn_grow *grow;
    struct zn_suspend *suspend;
    atomic_int suspended;
    struct zn_rma *rma;
    uint32_t devwin_ids; /* device windows made so far: the next one's GIN id - 1 */

    /* For the state dump (api/dump.c), written by the calling thread around each group of
     * operations, read by the dump thread: the operations issued so far, and the first of the
     * group running now (call_start_ns 0: none). */
    atomic_ullong ncalls;
    atomic_llong call_start_ns;
    atomic_int call_kind, call_coll, call_nops, call_peer; /* zn_gop_kind, zn_coll, root/peer */
    atomic_size_t call_count;
};

/* Every communicator's memory (util/handle.h): a destroyed one stays readable, zeroed, so
 * that zn_comm_check refuses it; the live ones are what the state dump prints. */
extern struct zn_handle_pool zn_comm_pool;
/* The state dump's provider for communicators (api/dump.c). */
void zn_comm_dump_all(void *arg);

/* How a new communicator joins: through a root (unique id) or from a parent's allgather. */
struct zn_join {
    int from_addrs;
    ncclUniqueId id;
    uint64_t magic;
    struct zn_boot_secret secret; /* the parent's job secret (from_addrs) */
    struct zn_boot_listener listener;
    union zn_sockaddr *addrs;
    ncclUniqueId *ids; /* ncclCommInitRankScalable with several ids (nids > 1), else NULL */
    int nids;
};

/* Allocate a communicator shell (no network yet). */
ncclResult_t zn_comm_alloc(int nranks, int rank, const ncclConfig_t *config, struct ncclComm **out);
/* Join and set up every layer; on failure the shell keeps the error in async_err. Consumes
 * join->addrs. Blocking. */
ncclResult_t zn_comm_setup(struct ncclComm *comm, struct zn_join *join);
/* Run zn_comm_setup on a thread of its own (non-blocking init, several inits in a group). */
ncclResult_t zn_comm_setup_async(struct ncclComm *comm, struct zn_join *join);
/* Wait for an asynchronous setup to end. */
void zn_comm_wait_setup(struct ncclComm *comm);
/* Whether a non-blocking init has not yet published its result (it waits out the init
 * thread's exit when the result is already visible). */
int zn_comm_init_pending(struct ncclComm *comm);
/* Free everything (the communicator must be idle). */
void zn_comm_free(struct ncclComm *comm);
/* Drop the grow id c handed out and no grow used, failing its root (grow.c; zn_comm_free). */
void zn_comm_grow_free(struct ncclComm *c);

/* ncclCommSuspend / ncclCommResume (suspend.c): the shared-memory arena released (its users'
 * pointers cleared), and made again, collectively over the communicator. */
void zn_comm_arena_release(struct ncclComm *comm);
ncclResult_t zn_comm_arena_rebuild(struct ncclComm *comm);

/* Check a handle passed by the user. */
ncclResult_t zn_comm_check(const struct ncclComm *comm, const char *fn);
/* zn_comm_check, and the communicator is not suspended (ncclCommSuspend): what every call
 * that uses the communicator's resources checks first. */
ncclResult_t zn_comm_check_active(const struct ncclComm *comm, const char *fn);
/* zn_comm_check_active, and a stream that fits the kind (NULL on a host communicator): what a
 * call that moves data checks first. */
ncclResult_t zn_comm_check_call(const struct ncclComm *comm, const char *fn, const void *stream);
/* Mark a communicator failed with err (the first error sticks). */
void zn_comm_set_error(struct ncclComm *comm, ncclResult_t err);
/* Keep the thread's last error on the communicator too (ncclGetLastError(comm)). */
void zn_comm_save_error(struct ncclComm *comm);

/* Most contexts of ncclPutSignal / ncclSignal / ncclWaitSignal (config.numRmaCtx). */
#define ZN_RMA_MAX_CTX 64

/* Validate and normalise a user config (NULL means defaults): a config from any header since
 * NCCL 2.14 is read by its size and version, the environment's overrides applied (NCCL's
 * names), the defaults filled in. */
ncclResult_t zn_config_apply(const ncclConfig_t *user, ncclConfig_t *out);

/* The comm kind the calling thread gets (ZINC_DEVICE, CUDA probe), and its device. */
ncclResult_t zn_comm_pick_kind(enum zn_comm_kind *kind, int *dev);

#endif
