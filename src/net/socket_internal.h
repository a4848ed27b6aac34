/*
 * The socket net's objects, shared by socket.c (setup: devices, listen, connect, accept,
 * close) and socket_data.c (isend / irecv / test and the helper threads).
 *
 * A connection is one control stream plus nthreads * nsocks_perthread data streams (NCCL's
 * NCCL_SOCKET_NTHREADS / NCCL_NSOCKS_PERTHREAD; by default 2 threads where the process may run
 * on 8 or more CPUs, else none: zn_nsock_config). Message headers always travel on the control
 * stream, in posting order. Without data streams, and for
 * messages up to NSOCK_INLINE_MAX, the payload follows its header there, moved by whichever
 * thread calls test(); a larger one is cut into at most one chunk per data stream, and each
 * helper thread moves the chunks of its streams. Both ends assign chunks to streams by the same
 * rule in the same message order, so no chunk needs a header of its own.
 */
#ifndef ZN_NET_SOCKET_INTERNAL_H
#define ZN_NET_SOCKET_INTERNAL_H

#include "net/nccl_net.h"
#include "net/socket_wire.h"
#include "util/err.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define NSOCK_MAX_RECVS    8 /* buffers one grouped irecv may carry (maxRecvs) */
#define NSOCK_MAX_REQUESTS NCCL_NET_MAX_REQUESTS
#define NSOCK_MAX_THREADS  16 /* NCCL's limits */
#define NSOCK_MAX_SOCKETS  64
#define NSOCK_MIN_CHUNK    (64 * 1024)
/* Messages up to this size travel on the control stream even where data streams exist: a
 * helper thread's hand-off costs more than such a message's copy (2 H200, allreduce across two
 * "hosts" on loopback with 2 helper threads: 8 B 33 us against NCCL's 30 without helpers). */
#define NSOCK_INLINE_MAX (64 * 1024)
/* Chunks one data stream may have queued: at most one per buffer of each request. */
#define NSOCK_RING (NSOCK_MAX_REQUESTS * NSOCK_MAX_RECVS)

struct nsock_comm;

struct nsock_req {
    struct nsock_comm *comm;
    int used;
    int n; /* buffers: 1 for a send, 1..NSOCK_MAX_RECVS for a receive */
    char *data[NSOCK_MAX_RECVS];
    size_t cap[NSOCK_MAX_RECVS];  /* posted size */
    size_t size[NSOCK_MAX_RECVS]; /* message size, once its header is known */
    int tag[NSOCK_MAX_RECVS];
    int matched[NSOCK_MAX_RECVS];
    int nmatched;
    int ctrl_done;         /* the control stream has finished with this request */
    atomic_int tasks_left; /* chunks still queued on helper threads */
};

/* A piece of one message's payload on one data stream. */
struct nsock_task {
    char *buf;
    size_t len, done;
    struct nsock_req *req;
};

struct nsock_stream {
    int fd;
    struct nsock_task ring[NSOCK_RING];
    unsigned head, tail; /* under the owning thread's mu */
};

struct nsock_thread {
    struct nsock_comm *comm;
    pthread_t tid;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop;
    int first, count; /* its streams: comm->streams[first .. first+count) */
};

struct nsock_comm {
    int is_send;
    int ctrl_fd;
    char peer[ZN_SOCKADDR_STRLEN]; /* the peer's address, for every error message */
    int nstreams;                  /* data streams */
    struct nsock_stream *streams;
    int nthreads;
    struct nsock_thread *threads;
    unsigned next_stream;
    atomic_int error; /* 0 or a negative errno seen by a helper thread */
    atomic_int err_stream;
    int failed;                 /* set once an error was reported: every later call fails */
    char errmsg[ZN_ERRMSG_MAX]; /* that error, repeated (not logged again) by later calls */

    struct nsock_req reqs[NSOCK_MAX_REQUESTS];
    int order[NSOCK_MAX_REQUESTS]; /* slots waiting for the control stream, oldest first */
    unsigned ohead, otail;

    /* Control stream progress for the request at order[ohead]. */
    uint8_t hdr[ZN_NSOCK_HDR_LEN];
    size_t hdr_done;
    int hdr_ready;   /* send: hdr encoded; recv: hdr decoded and matched */
    int cur_elem;    /* recv: the buffer the current message lands in */
    size_t pay_done; /* inline payload moved so far */
};

/* Parameters read once (socket.c). */
void zn_nsock_config(int *nthreads, int *nsocks_per_thread);

/* socket_data.c */
ncclResult_t zn_nsock_threads_start(struct nsock_comm *c);
void zn_nsock_comm_free(struct nsock_comm *c);
ncclResult_t zn_nsock_isend(void *comm, void *data, size_t size, int tag, void *mh, void *ph,
                            void **request);
ncclResult_t zn_nsock_irecv(void *comm, int n, void **data, size_t *sizes, int *tags, void **mh,
                            void **ph, void **request);
ncclResult_t zn_nsock_test(void *request, int *done, int *sizes);

#endif
