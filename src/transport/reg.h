/*
 * Registered buffers: the one table of a communicator's registrations and its lookups.
 *
 * ncclCommRegister (api/misc.c) registers through a transport's reg slot (the p2p transport
 * maps the buffer into every peer and records it here); the CUDA executor asks zn_reg_find
 * whether a call's buffers are registered, and where each peer sees them, to run it zero-copy.
 * Owned by the transport that registered the entries; read by the thread driving the
 * communicator only.
 */
#ifndef ZN_TRANSPORT_REG_H
#define ZN_TRANSPORT_REG_H

#include "nccl.h"

#include <stddef.h>
#include <stdint.h>

#define ZN_REG_MAX_RANKS 8 /* as ZN_P2P_MAX_RANKS: registrations are shared by p2p peers */

/* A registered range and its allocation as every rank of the communicator maps it. */
struct zn_reg_entry {
    uintptr_t lo, hi;             /* the registered range */
    uintptr_t base;               /* start of its allocation */
    size_t alloc_size;            /* size of the allocation */
    void *peer[ZN_REG_MAX_RANKS]; /* the allocation as each rank maps it (own: base) */
    uint32_t id;                  /* unique in the communicator's life, never 0 */
};

struct zn_reg_table {
    struct zn_reg_entry **e; /* entries stay where they are while registered */
    int n, cap;
    uint32_t seq; /* last id handed out */
};

/* Add a copy of *r with a fresh id; *out points at the table's entry (stable until removed). */
ncclResult_t zn_reg_add(struct zn_reg_table *t, const struct zn_reg_entry *r,
                        struct zn_reg_entry **out);
/* Remove the entry of id (nothing if there is none). */
void zn_reg_remove(struct zn_reg_table *t, uint32_t id);
/* The entry whose range holds [p, p + bytes), or NULL (a NULL table holds nothing). */
const struct zn_reg_entry *zn_reg_find(const struct zn_reg_table *t, const void *p, size_t bytes);
/* Free every entry. */
void zn_reg_fini(struct zn_reg_table *t);

#endif
