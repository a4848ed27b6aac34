/* The registration table (reg.h). A handful of entries per communicator: a linear search. */
#include "reg.h"
#include "util/err.h"

#include <stdlib.h>

ncclResult_t zn_reg_add(struct zn_reg_table *t, const struct zn_reg_entry *r,
                        struct zn_reg_entry **out)
{
    if (t->n == t->cap) {
        int cap = t->cap ? 2 * t->cap : 8;
        struct zn_reg_entry **n = realloc(t->e, (size_t)cap * sizeof(*n));
        if (!n) return zn_error(ncclSystemError, ZN_P2P, "out of memory");
        t->e = n;
        t->cap = cap;
    }
    struct zn_reg_entry *e = malloc(sizeof(*e));
    if (!e) return zn_error(ncclSystemError, ZN_P2P, "out of memory");
    *e = *r;
    /* Ids name registrations between ranks: 0 is "none", and one is never reused. */
    e->id = ++t->seq;
    t->e[t->n++] = e;
    *out = e;
    return ncclSuccess;
}

void zn_reg_remove(struct zn_reg_table *t, uint32_t id)
{
    for (int i = 0; i < t->n; i++)
        if (t->e[i]->id == id) {
            free(t->e[i]);
            t->e[i] = t->e[--t->n];
            return;
        }
}

const struct zn_reg_entry *zn_reg_find(const struct zn_reg_table *t, const void *p, size_t bytes)
{
    uintptr_t lo = (uintptr_t)p;
    for (int i = 0; t && i < t->n; i++)
        if (lo >= t->e[i]->lo && lo + bytes <= t->e[i]->hi && lo + bytes >= lo) return t->e[i];
    return NULL;
}

void zn_reg_fini(struct zn_reg_table *t)
{
    for (int i = 0; i < t->n; i++) free(t->e[i]);
    free(t->e);
    *t = (struct zn_reg_table){ 0 };
}
