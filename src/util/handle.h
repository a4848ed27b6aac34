/*
 * Handles given to users (communicators): memory that stays valid after destroy, so that a
 * handle used after destroy is refused rather than read after free.
 *
 * The check on entry is the object's magic word, one load. A destroyed object's memory is not
 * given back to malloc: it is zeroed (magic included) and kept in a pool, so that a second
 * destroy, or a call on the destroyed handle, reads zeroes and gets ncclInvalidArgument
 * instead of corrupting the heap. The pool hands its oldest shell to a new object only once
 * more than ZN_HANDLE_KEEP shells wait, so a stale handle does not alias the next communicator.
 * Memory held: the peak number of live objects plus ZN_HANDLE_KEEP shells.
 *
 * Rejected: a registry of live pointers looked up on every call. Lock-free lookups need
 * tables that are never freed (a reader may still probe a retired one) or a reader count (an
 * atomic add on a shared line per call); the kept shells cost nothing per call and catch the
 * same misuse. Neither catches a handle whose shell was reused for a newer object, nor a
 * destroy racing another thread's call on the same handle (both are user errors no check
 * can make safe).
 *
 * The pool also lists its live objects, for the state dump (util/dump.h): the dump walks them
 * under the pool's lock, so an object must be unlisted (zn_handle_unlist) before its parts are
 * torn down.
 */
#ifndef ZN_UTIL_HANDLE_H
#define ZN_UTIL_HANDLE_H

#include "nccl.h"

#include <pthread.h>
#include <stddef.h>

#define ZN_HANDLE_KEEP 16

struct zn_handle_node;

struct zn_handle_pool {
    pthread_mutex_t lock;
    const char *what;                        /* for messages: "communicator" */
    struct zn_handle_node *live;             /* doubly linked, newest first */
    struct zn_handle_node *dead, *dead_tail; /* FIFO of zeroed shells */
    int nlive, ndead;
    size_t size; /* bytes of one object, fixed by the first allocation */
};

#define ZN_HANDLE_POOL_INIT(what_)                         \
    {                                                      \
        .lock = PTHREAD_MUTEX_INITIALIZER, .what = (what_) \
    }

/* A zeroed object of size bytes (the same size on every call for one pool), listed live. */
ncclResult_t zn_handle_alloc(struct zn_handle_pool *p, size_t size, void **out);
/* Take obj off the live list (idempotent): the dump no longer sees it. */
void zn_handle_unlist(struct zn_handle_pool *p, void *obj);
/* Zero obj and keep its memory as a shell (unlists it first if needed). */
void zn_handle_free(struct zn_handle_pool *p, void *obj);
/* Call fn on every live object, under the pool's lock (fn must not alloc/free in p). */
void zn_handle_each(struct zn_handle_pool *p, void (*fn)(void *obj, void *arg), void *arg);

#endif
