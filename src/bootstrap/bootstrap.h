/*
 * Bootstrap: how the ranks of a new communicator find each other, and the out-of-band
 * (socket) messaging the layers above use during setup.
 *
 * Rendezvous: every rank connects to the root named in the unique id and sends its rank and
 * listening address; once all nranks have arrived the root tells each rank only the address
 * of the next rank, and rank 0 every address (O(n) at the root, no O(n^2) table), then exits.
 * The ranks connect into a ring, and rank 0 sends the addresses down a binomial tree (coll.c).
 * A rank that disconnects before everyone has arrived, or a deadline that passes first, is
 * reported by the root to every waiting rank.
 *
 * After init: allgather and barrier in log2(n) rounds over point-to-point connections opened
 * on first use (coll.c), and point-to-point send/recv. The ring carries ABORT and BYE: every
 * wait watches the predecessor, so a death fails the bootstrap at once. All of it is blocking
 * with the ZINC_TIMEOUT deadline and watches the communicator's abort flag. One thread at a
 * time may use a zn_boot.
 *
 * Authentication: every bootstrap connection proves that it knows the job secret before
 * anything it sends is taken (wire.h: the listener's CHALLENGE, a HELLO with an HMAC). The
 * secret is 32 random bytes in the unique id (ncclGetUniqueId without ZINC_COMM_ID), or, for a
 * job that meets at ZINC_COMM_ID (whose magic anyone who sees the address can compute), the
 * hash of ZINC_JOB_SECRET, which zinc-run draws for its ranks and other launchers can pass.
 * Without either, the secret is all zeros and proves nothing (logged once at INFO).
 */
#ifndef ZN_BOOTSTRAP_BOOTSTRAP_H
#define ZN_BOOTSTRAP_BOOTSTRAP_H

#include "nccl.h"
#include "util/sock.h"

#include <stdatomic.h>
#include <stdint.h>

#define ZN_ID_SECRET 1u /* zn_unique_id.flags: secret holds a job secret */

/* The unique id, as stored in ncclUniqueId's 128 bytes (88 used). */
struct zn_unique_id {
    uint64_t magic;
    uint32_t version;
    uint32_t rank0_hosts_root; /* 1: ZINC_COMM_ID; rank 0 starts the root inside init */
    uint8_t root_addr[32];
    uint32_t flags; /* ZN_ID_SECRET */
    uint32_t pad;
    uint8_t secret[32];
};
_Static_assert(sizeof(struct zn_unique_id) <= NCCL_UNIQUE_ID_BYTES, "unique id fits");

/* What follows struct zn_unique_id in an id made by ncclCommGetUniqueId (zn_boot_get_grow_id):
 * the tag says so, and the size of the communicator it grows says which ranks are new. Other
 * ids have zeros there.
 *
 *    0                           88        92              96
 *    +---------------------------+---------+---------------+
 *    | struct zn_unique_id       | tag     | parent nranks |
 *    +---------------------------+---------+---------------+
 */
#define ZN_GROW_TAG 0x776f7247u /* "Grow" */
struct zn_grow_tail {
    uint32_t tag;
    int32_t parent_nranks;
};
_Static_assert(sizeof(struct zn_unique_id) + sizeof(struct zn_grow_tail) <= NCCL_UNIQUE_ID_BYTES,
               "grow id fits");

struct zn_boot;

/* A job secret (see above), copied from a parent communicator's bootstrap to its children's. */
struct zn_boot_secret {
    uint8_t key[32];
};

/* A bootstrap listening socket, made before the ranks know each other (split, shrink). */
struct zn_boot_listener {
    int fd;
    union zn_sockaddr addr;
};

/* ncclGetUniqueId: with ZINC_COMM_ID set, the address from it and a magic derived from it
 * (the same on every rank); otherwise a root thread is started in this process on an
 * ephemeral port and a random magic is drawn. */
ncclResult_t zn_boot_get_unique_id(ncclUniqueId *out);
/* A unique id served by a new root in this process, whatever ZINC_COMM_ID says (for
 * communicators private to the process, such as ncclCommInitAll's). */
ncclResult_t zn_boot_get_private_id(ncclUniqueId *out);

/* A root started for one ncclCommGrow, as its holder sees it. */
struct zn_boot_root;

/* ncclCommGetUniqueId: an id with a new root in this process (ZINC_COMM_ID plays no part), a
 * random magic and a fresh random job secret, and the grow tail above. The root serves one
 * rendezvous; after it, until its deadline, it answers every rank that proves the secret with
 * an error saying that the id was used (root.c). *root is the holder's handle: close it to fail
 * a grow that will not come, or release it to let the root run on by itself. */
ncclResult_t zn_boot_get_grow_id(int parent_nranks, ncclUniqueId *out, struct zn_boot_root **root);
/* The size of the communicator that a grow id grows, or -1 if id was not made by
 * zn_boot_get_grow_id. */
int zn_boot_grow_id_parent(const ncclUniqueId *id);
/* Fail the root's rendezvous with code and why (the ranks that joined and those that join
 * until its deadline get them), unless it already served or failed; then release h. */
void zn_boot_root_close(struct zn_boot_root *h, ncclResult_t code, const char *why);
/* Drop the holder's handle: the root runs on and ends at its deadline. */
void zn_boot_root_release(struct zn_boot_root *h);

/* The id every rank derives from the same "host:port" (MSCCL++'s mscclppCommInitRank): rank 0
 * serves the rendezvous there inside zn_boot_init, as with ZINC_COMM_ID. */
ncclResult_t zn_boot_id_from_addr(const char *hostport, ncclUniqueId *out);

/* Join the communicator described by id. Blocks until all ranks joined or the deadline. */
ncclResult_t zn_boot_init(const ncclUniqueId *id, int rank, int nranks,
                          const atomic_int *abort_flag, struct zn_boot **out);

/* Join through several roots (ncclCommInitRankScalable; scalable.c says how the roots share
 * the rendezvous). Every rank passes the same nids ids in the same order; ids that repeat
 * count once, and a single distinct id is exactly zn_boot_init. Blocking, like zn_boot_init. */
ncclResult_t zn_boot_init_scalable(const ncclUniqueId *ids, int nids, int rank, int nranks,
                                   const atomic_int *abort_flag, struct zn_boot **out);

ncclResult_t zn_boot_listener_create(struct zn_boot_listener *l);
void zn_boot_listener_close(struct zn_boot_listener *l);

/* Join a communicator whose members already know every member's listening address (from an
 * allgather on a parent communicator). Takes ownership of l. */
ncclResult_t zn_boot_init_addrs(uint64_t magic, const struct zn_boot_secret *secret, int rank,
                                int nranks, struct zn_boot_listener *l,
                                const union zn_sockaddr *addrs, const atomic_int *abort_flag,
                                struct zn_boot **out);

/* buf holds nranks blocks of block bytes; this rank's is at rank*block. */
ncclResult_t zn_boot_allgather(struct zn_boot *b, void *buf, size_t block);
ncclResult_t zn_boot_barrier(struct zn_boot *b);
ncclResult_t zn_boot_send(struct zn_boot *b, int peer, uint32_t tag, const void *buf, size_t len);
ncclResult_t zn_boot_recv(struct zn_boot *b, int peer, uint32_t tag, void *buf, size_t len);

/* Tell the ring neighbour (best effort, non-blocking) that this rank failed and why, so that
 * ranks blocked in a bootstrap collective fail quickly with the reason instead of timing out. */
void zn_boot_abort(struct zn_boot *b, ncclResult_t code, const char *why);

/* Let the survivors of a failure talk point to point again (ncclCommRevoke, ncclCommShrink
 * with NCCL_SHRINK_ABORT): forget this bootstrap's failure and watch abort_flag from now on
 * instead of the one given at creation. Ring collectives may still fail (the ring can pass
 * through a dead rank); send/recv between live ranks work. No other thread may be using b. */
void zn_boot_reopen(struct zn_boot *b, const atomic_int *abort_flag);

/* Whole frames this rank wrote and read on bootstrap sockets (root, ring, point to point),
 * headers included: what init costs each rank in messages, to check that it stays O(log n).
 * A point-to-point DATA frame counts as received when zn_boot_recv takes it, so that once a
 * collective returned on every rank the counts do not depend on timing. CHALLENGE frames (one
 * per connection, whichever side happens to serve it first) are not counted. */
struct zn_boot_stats {
    uint64_t msgs_sent, bytes_sent;
    uint64_t msgs_recv, bytes_recv;
};
void zn_boot_get_stats(const struct zn_boot *b, struct zn_boot_stats *out);

int zn_boot_rank(const struct zn_boot *b);
int zn_boot_nranks(const struct zn_boot *b);
uint64_t zn_boot_magic(const struct zn_boot *b);
void zn_boot_get_secret(const struct zn_boot *b, struct zn_boot_secret *out);
const union zn_sockaddr *zn_boot_peer_addr(const struct zn_boot *b, int rank);
void zn_boot_destroy(struct zn_boot *b);

/* Internal to the bootstrap layer: start a root serving one init of a job. */
ncclResult_t zn_boot_root_start(const union zn_sockaddr *addr, uint64_t magic,
                                const uint8_t secret[32], union zn_sockaddr *bound);
/* The same for a grow id: single use, with a handle for its holder (zn_boot_get_grow_id). */
ncclResult_t zn_boot_root_start_grow(const union zn_sockaddr *addr, uint64_t magic,
                                     const uint8_t secret[32], union zn_sockaddr *bound,
                                     struct zn_boot_root **handle);

#endif
