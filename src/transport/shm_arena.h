/*
 * The shared-memory arena of a communicator whose ranks all share one host: one segment with a
 * control block and a data slot per rank. The shm_* algorithms move data with plain loads and
 * stores through the slots and synchronise with monotonically increasing counters -- no
 * system call on the data path.
 *
 * Segment layout (version ZN_ARENA_VERSION):
 *
 *   +----------------------------------------------------------------+
 *   | header: version, nranks, nbuf, buf_size, abort word + message |  4 KB
 *   +----------------------------------------------------------------+
 *   | control of rank 0: counter lines READY, OUT, DONE (window|sig) |  one 64 B
 *   | control of rank 1 ...                                          |  line each
 *   +----------------------------------------------------------------+
 *   | slot of rank 0: nbuf buffers of buf_size bytes                 |
 *   | slot of rank 1 ...                                             |
 *   +----------------------------------------------------------------+
 *
 * Work is cut into windows numbered 1, 2, 3... identically on every rank; window s uses buffer
 * s % nbuf of each slot. A counter holds the last window its rank finished a phase of, and a
 * digest of that call's signature (collective, count, type, op, root), so ranks that made
 * different calls are caught instead of exchanging garbage.
 */
#ifndef ZN_TRANSPORT_SHM_ARENA_H
#define ZN_TRANSPORT_SHM_ARENA_H

#include "transport.h"
#include "util/shm.h"

#include <stdatomic.h>

#define ZN_ARENA_VERSION 2

enum zn_arena_ctr { ZN_ARENA_READY = 0, ZN_ARENA_OUT = 1, ZN_ARENA_DONE = 2, ZN_ARENA_NCTR = 3 };

/* A counter line: window number (high 48 bits) and a 16-bit digest of the call's signature
 * (low bits) in one 64-bit word, so that a reader never pairs one post's window with the next
 * post's signature (two separate words could be read torn between two posts). */
struct zn_arena_line {
    _Alignas(64) atomic_uint_least64_t word;
};
#define ZN_ARENA_SIG_BITS 16

static inline uint64_t zn_arena_sig16(uint64_t sig)
{
    return (sig ^ (sig >> 16) ^ (sig >> 32) ^ (sig >> 48)) & 0xffff;
}

struct zn_arena_hdr;

struct zn_arena {
    struct zn_shm_seg seg;
    struct zn_arena_hdr *hdr;
    int nranks, rank;
    int nbuf;
    size_t buf_size;
    struct zn_arena_line *ctrl; /* nranks * ZN_ARENA_NCTR lines */
    uint8_t *slots;             /* nranks * nbuf * buf_size bytes */
    uint64_t seq;               /* last window number handed out */
};

/* The shm transport's collective memory (zn_transport_collmem(&zn_transport_shm)): create makes
 * a struct zn_arena with args->bytes per rank's slot, collectively over a communicator whose
 * ranks all share one host (rank 0 creates the segment, the others map it; blocks until mapped
 * or the deadline); destroy unmaps it. Users other than the transport see only the accessors
 * below. */
extern const struct zn_transport_collmem_ops zn_shm_collmem;

static inline void *zn_arena_buf(const struct zn_arena *a, int rank, uint64_t seq)
{
    return a->slots + ((size_t)rank * (size_t)a->nbuf + seq % (uint64_t)a->nbuf) * a->buf_size;
}

static inline void zn_arena_post(struct zn_arena *a, int ctr, uint64_t value, uint64_t sig)
{
    struct zn_arena_line *l = &a->ctrl[a->rank * ZN_ARENA_NCTR + ctr];
    atomic_store_explicit(&l->word, value << ZN_ARENA_SIG_BITS | zn_arena_sig16(sig),
                          memory_order_release);
}

/* 1: rank's counter reached value; 0: not yet; -1: it is exactly value but with another
 * signature (the ranks made different calls). sig 0 skips the signature check. */
static inline int zn_arena_ready(const struct zn_arena *a, int rank, int ctr, uint64_t value,
                                 uint64_t sig)
{
    const struct zn_arena_line *l = &a->ctrl[rank * ZN_ARENA_NCTR + ctr];
    uint64_t w = atomic_load_explicit(&l->word, memory_order_acquire);
    uint64_t v = w >> ZN_ARENA_SIG_BITS;
    if (v < value) return 0;
    if (v == value && sig && (w & 0xffff) != zn_arena_sig16(sig)) return -1;
    return 1;
}

/* Publish that this rank failed (or aborted) so that ranks waiting on it fail at once. */
void zn_arena_set_abort(struct zn_arena *a, ncclResult_t code, const char *msg);
/* Non-zero (the ncclResult_t) if some rank published a failure; msg gets its text. */
int zn_arena_aborted(const struct zn_arena *a, char *msg, size_t len);

#endif
