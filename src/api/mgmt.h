/*
 * Communicator management after init, shared by the api files: background jobs (non-blocking
 * finalize and revoke), revoking, child communicators (split, shrink) and windows.
 *
 * Each piece is bookkeeping over the bootstrap and the abort flag, the same for host and cuda
 * communicators.
 */
#ifndef ZN_API_MGMT_H
#define ZN_API_MGMT_H

#include "comm.h"

/* Run job(comm) on a thread of its own, for a non-blocking communicator. The communicator's
 * state is ncclInProgress until the job returns, then the job's result; the job counts as a
 * call using the communicator (busy), so destroy and abort wait for it. Returns
 * ncclInProgress, or an error if no thread could be started. */
ncclResult_t zn_comm_run_async(struct ncclComm *c, ncclResult_t (*job)(struct ncclComm *),
                               const char *fn);

/* Wait until at most own calls (the caller's) use the communicator, up to ZINC_TIMEOUT. */
ncclResult_t zn_comm_wait_quiet(struct ncclComm *c, int own, const char *fn);

/* Revoke c and wait until it is quiescent (ncclCommRevoke on a blocking communicator, and
 * ncclCommShrink with NCCL_SHRINK_ABORT): in-flight calls on other threads fail, later
 * collectives and send/recv fail at once, the bootstrap serves split and shrink again. The
 * state ends as ncclSuccess. */
ncclResult_t zn_comm_revoke_sync(struct ncclComm *c, const char *fn);

/* A communicator of m ranks, this one being rank me, whose members join a ring directly:
 * each knows every member's listening address (addrs, consumed) and the magic. Takes the
 * listener. Blocking or not as cfg says (ncclInProgress then). */
ncclResult_t zn_comm_create_child(struct ncclComm *parent, int m, int me, uint64_t magic,
                                  struct zn_boot_listener *l, union zn_sockaddr *addrs,
                                  const ncclConfig_t *cfg, ncclComm_t *newcomm);

/* Free the windows still registered on c (destroy, abort). */
void zn_windows_free(struct ncclComm *c);

#endif
