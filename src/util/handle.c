#include "handle.h"
#include "err.h"

#include <stdlib.h>
#include <string.h>

/* The node sits before the object, a cache line long so that the object keeps malloc's
 * alignment and does not share a line with the list pointers. */
struct zn_handle_node {
    struct zn_handle_node *prev, *next;
    int listed;
    char pad[64 - 2 * sizeof(void *) - sizeof(int)];
};
_Static_assert(sizeof(struct zn_handle_node) == 64, "node is one cache line");

static struct zn_handle_node *node_of(void *obj)
{
    return (struct zn_handle_node *)obj - 1;
}

static void unlink_live(struct zn_handle_pool *p, struct zn_handle_node *n)
{
    if (!n->listed) return;
    if (n->prev)
        n->prev->next = n->next;
    else
        p->live = n->next;
    if (n->next) n->next->prev = n->prev;
    n->prev = n->next = NULL;
    n->listed = 0;
    p->nlive--;
}

ncclResult_t zn_handle_alloc(struct zn_handle_pool *p, size_t size, void **out)
{
    pthread_mutex_lock(&p->lock);
    if (!p->size) p->size = size;
    if (size != p->size) {
        pthread_mutex_unlock(&p->lock);
        return zn_error(ncclInternalError, ZN_INIT, "%s pool: object of %zu bytes, pool of %zu",
                        p->what, size, p->size);
    }
    struct zn_handle_node *n = NULL;
    if (p->ndead > ZN_HANDLE_KEEP) {
        n = p->dead;
        p->dead = n->next;
        if (!p->dead) p->dead_tail = NULL;
        p->ndead--;
        memset(n, 0, sizeof(*n) + size);
    } else {
        n = calloc(1, sizeof(*n) + size);
        if (!n) {
            pthread_mutex_unlock(&p->lock);
            return zn_error(ncclSystemError, ZN_INIT, "out of memory for a %s", p->what);
        }
    }
    n->next = p->live;
    if (p->live) p->live->prev = n;
    p->live = n;
    n->listed = 1;
    p->nlive++;
    pthread_mutex_unlock(&p->lock);
    *out = n + 1;
    return ncclSuccess;
}

void zn_handle_unlist(struct zn_handle_pool *p, void *obj)
{
    if (!obj) return;
    pthread_mutex_lock(&p->lock);
    unlink_live(p, node_of(obj));
    pthread_mutex_unlock(&p->lock);
}

void zn_handle_free(struct zn_handle_pool *p, void *obj)
{
    if (!obj) return;
    struct zn_handle_node *n = node_of(obj);
    pthread_mutex_lock(&p->lock);
    unlink_live(p, n);
    /* Through a volatile pointer: the compiler may not drop stores to memory it knows is about
     * to be unused (that is how `c->magic = 0; free(c)` lost its first half). */
    volatile unsigned char *b = obj;
    for (size_t i = 0; i < p->size; i++) b[i] = 0;
    n->next = NULL;
    if (p->dead_tail)
        p->dead_tail->next = n;
    else
        p->dead = n;
    p->dead_tail = n;
    p->ndead++;
    pthread_mutex_unlock(&p->lock);
}

void zn_handle_each(struct zn_handle_pool *p, void (*fn)(void *obj, void *arg), void *arg)
{
    pthread_mutex_lock(&p->lock);
    for (struct zn_handle_node *n = p->live; n; n = n->next) fn(n + 1, arg);
    pthread_mutex_unlock(&p->lock);
}
