/*
 * The socket net's data path: isend / irecv / test and the helper threads (socket_internal.h
 * explains the streams).
 *
 * Requests of a comm go through the control stream in posting order. A receive of n buffers is
 * a group: the messages that arrive while it is the oldest unfinished receive fill its buffers,
 * each the first unfilled buffer with the message's tag, which is NCCL's matching rule (a
 * receive matches the next send with the same tag). The receiver never reads a header before a
 * receive is posted, so unexpected messages wait in the kernel's socket buffer, not in ours.
 *
 * test() progresses the whole comm, then reports on its request. Helper threads only move
 * payload chunks; every error they see is left in comm->error for test() to report, because
 * only the caller's thread may record an error (zn_error is per thread).
 */
#include "net/socket_internal.h"
#include "util/err.h"
#include "util/log.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The comm is unusable from now on: remember the error that said why (logged once, where it
 * was detected), so that later calls can repeat it. */
static ncclResult_t comm_fail(struct nsock_comm *c, ncclResult_t r)
{
    c->failed = 1;
    snprintf(c->errmsg, sizeof(c->errmsg), "%s", zn_last_error());
    return r;
}

static ncclResult_t comm_failed(struct nsock_comm *c)
{
    zn_set_last_error(c->errmsg);
    return ncclRemoteError;
}

static ncclResult_t comm_error(struct nsock_comm *c, int err, const char *what)
{
    if (err == -EPIPE || err == -ECONNRESET)
        return comm_fail(c, zn_error(ncclRemoteError, ZN_NET,
                                     "socket net: connection to %s closed by the peer during %s",
                                     c->peer, what));
    return comm_fail(c, zn_error(ncclRemoteError, ZN_NET,
                                 "socket net: %s on the connection to %s failed: %s", what, c->peer,
                                 strerror(-err)));
}

/* ------------------------------------------------------------------------------------------ */
/* Helper threads                                                                             */
/* ------------------------------------------------------------------------------------------ */

/* Move bytes of the head task of stream s; 1 if anything moved. */
static int stream_step(struct nsock_thread *t, struct nsock_stream *s, int is_send, int *err)
{
    pthread_mutex_lock(&t->mu);
    int have = s->head != s->tail;
    struct nsock_task *task = &s->ring[s->head % NSOCK_RING];
    pthread_mutex_unlock(&t->mu);
    if (!have) return 0;
    size_t n = 0;
    int rc = is_send ? zn_sock_send_some(s->fd, task->buf + task->done, task->len - task->done, &n)
                     : zn_sock_recv_some(s->fd, task->buf + task->done, task->len - task->done, &n);
    if (rc != 0) {
        *err = rc;
        return 0;
    }
    task->done += n;
    if (task->done == task->len) {
        atomic_fetch_sub(&task->req->tasks_left, 1);
        pthread_mutex_lock(&t->mu);
        s->head++;
        pthread_mutex_unlock(&t->mu);
    }
    return n > 0 || task->done == task->len;
}

static void *helper_main(void *arg)
{
    struct nsock_thread *t = arg;
    struct nsock_comm *c = t->comm;
    struct pollfd pfd[NSOCK_MAX_SOCKETS];
    for (;;) {
        pthread_mutex_lock(&t->mu);
        int idle = 1;
        for (int i = 0; i < t->count; i++)
            idle &= c->streams[t->first + i].head == c->streams[t->first + i].tail;
        while (idle && !t->stop) {
            pthread_cond_wait(&t->cv, &t->mu);
            idle = 1;
            for (int i = 0; i < t->count; i++)
                idle &= c->streams[t->first + i].head == c->streams[t->first + i].tail;
        }
        int stop = t->stop;
        pthread_mutex_unlock(&t->mu);
        if (stop) return NULL;
        int moved = 0, err = 0;
        for (int i = 0; i < t->count && !err; i++)
            moved |= stream_step(t, &c->streams[t->first + i], c->is_send, &err);
        if (err) {
            int zero = 0;
            atomic_compare_exchange_strong(&c->error, &zero, err);
            pthread_mutex_lock(&t->mu);
            while (!t->stop)
                pthread_cond_wait(&t->cv, &t->mu); /* the comm is dead: wait for close */
            pthread_mutex_unlock(&t->mu);
            return NULL;
        }
        if (moved) continue;
        for (int i = 0; i < t->count; i++)
            pfd[i] = (struct pollfd){ .fd = c->streams[t->first + i].fd,
                                      .events = c->is_send ? POLLOUT : POLLIN };
        poll(pfd, (nfds_t)t->count, 100); /* bounded, so that stop is seen */
    }
}

ncclResult_t zn_nsock_threads_start(struct nsock_comm *c)
{
    if (c->nstreams == 0) return ncclSuccess;
    int nt, ns;
    zn_nsock_config(&nt, &ns);
    if (nt < 1) nt = 1; /* the peer asked for data streams: serve them with at least one thread */
    if (nt > c->nstreams) nt = c->nstreams;
    ZN_CHECK(zn_calloc(&c->threads, (size_t)nt, "socket net helper threads"));
    for (int i = 0; i < c->nstreams; i++) zn_sock_tune(c->streams[i].fd, 0);
    zn_sock_tune(c->ctrl_fd, 0);
    int per = c->nstreams / nt, extra = c->nstreams % nt, first = 0;
    for (int i = 0; i < nt; i++) {
        struct nsock_thread *t = &c->threads[i];
        t->comm = c;
        t->first = first;
        t->count = per + (i < extra);
        first += t->count;
        pthread_mutex_init(&t->mu, NULL);
        pthread_cond_init(&t->cv, NULL);
        int rc = pthread_create(&t->tid, NULL, helper_main, t);
        if (rc != 0) {
            pthread_mutex_destroy(&t->mu);
            pthread_cond_destroy(&t->cv);
            c->nthreads = i; /* zn_nsock_comm_free stops the ones started */
            return zn_error(ncclSystemError, ZN_NET, "socket net: cannot start a helper thread: %s",
                            strerror(rc));
        }
        c->nthreads = i + 1;
    }
    return ncclSuccess;
}

void zn_nsock_comm_free(struct nsock_comm *c)
{
    for (int i = 0; i < c->nthreads; i++) {
        struct nsock_thread *t = &c->threads[i];
        pthread_mutex_lock(&t->mu);
        t->stop = 1;
        pthread_cond_signal(&t->cv);
        pthread_mutex_unlock(&t->mu);
        pthread_join(t->tid, NULL);
        pthread_mutex_destroy(&t->mu);
        pthread_cond_destroy(&t->cv);
    }
    for (int i = 0; i < c->nstreams; i++)
        if (c->streams[i].fd >= 0) close(c->streams[i].fd);
    if (c->ctrl_fd >= 0) close(c->ctrl_fd);
    free(c->threads);
    free(c->streams);
    free(c);
}

/* Whether a message of size bytes follows its header on the control stream (both ends decide
 * alike: the same streams, the same size). */
static int inline_payload(const struct nsock_comm *c, size_t size)
{
    return c->nstreams == 0 || size <= NSOCK_INLINE_MAX;
}

/* Cut a message into at most one chunk per data stream and queue the chunks. */
static void queue_chunks(struct nsock_comm *c, struct nsock_req *r, char *buf, size_t size)
{
    size_t chunk = (size + (size_t)c->nstreams - 1) / (size_t)c->nstreams;
    if (chunk < NSOCK_MIN_CHUNK) chunk = NSOCK_MIN_CHUNK;
    for (size_t off = 0; off < size; off += chunk) {
        size_t len = size - off < chunk ? size - off : chunk;
        int si = (int)(c->next_stream++ % (unsigned)c->nstreams);
        struct nsock_stream *s = &c->streams[si];
        struct nsock_thread *t = &c->threads[si % c->nthreads];
        for (int k = 0; k < c->nthreads; k++)
            if (si >= c->threads[k].first && si < c->threads[k].first + c->threads[k].count)
                t = &c->threads[k];
        atomic_fetch_add(&r->tasks_left, 1);
        pthread_mutex_lock(&t->mu);
        s->ring[s->tail % NSOCK_RING] =
            (struct nsock_task){ .buf = buf + off, .len = len, .req = r };
        s->tail++;
        pthread_cond_signal(&t->cv);
        pthread_mutex_unlock(&t->mu);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Posting                                                                                    */
/* ------------------------------------------------------------------------------------------ */

static struct nsock_req *req_alloc(struct nsock_comm *c)
{
    if (c->otail - c->ohead >= NSOCK_MAX_REQUESTS) return NULL;
    for (int i = 0; i < NSOCK_MAX_REQUESTS; i++) {
        struct nsock_req *r = &c->reqs[i];
        if (r->used) continue;
        memset(r, 0, sizeof(*r));
        r->used = 1;
        r->comm = c;
        c->order[c->otail++ % NSOCK_MAX_REQUESTS] = i;
        return r;
    }
    return NULL;
}

ncclResult_t zn_nsock_isend(void *comm, void *data, size_t size, int tag, void *mh, void *ph,
                            void **request)
{
    struct nsock_comm *c = comm;
    *request = NULL;
    if (c->failed) return comm_failed(c);
    struct nsock_req *r = req_alloc(c);
    if (!r) return ncclSuccess; /* NCCL_NET_MAX_REQUESTS in flight: try again */
    r->n = 1;
    r->data[0] = data;
    r->cap[0] = r->size[0] = size;
    r->tag[0] = tag;
    if (!inline_payload(c, size)) queue_chunks(c, r, data, size);
    *request = r;
    return ncclSuccess;
}

ncclResult_t zn_nsock_irecv(void *comm, int n, void **data, size_t *sizes, int *tags, void **mh,
                            void **ph, void **request)
{
    struct nsock_comm *c = comm;
    *request = NULL;
    if (n < 1 || n > NSOCK_MAX_RECVS)
        return zn_error(ncclInvalidArgument, ZN_NET,
                        "socket net: irecv of %d buffers (1 to %d, maxRecvs)", n, NSOCK_MAX_RECVS);
    if (c->failed) return comm_failed(c);
    struct nsock_req *r = req_alloc(c);
    if (!r) return ncclSuccess;
    r->n = n;
    for (int i = 0; i < n; i++) {
        r->data[i] = data[i];
        r->cap[i] = sizes[i];
        r->tag[i] = tags[i];
    }
    *request = r;
    return ncclSuccess;
}

/* ------------------------------------------------------------------------------------------ */
/* Control stream progress                                                                    */
/* ------------------------------------------------------------------------------------------ */

static void ctrl_pop(struct nsock_comm *c, struct nsock_req *r)
{
    r->ctrl_done = 1;
    c->ohead++;
    c->hdr_done = 0;
    c->hdr_ready = 0;
    c->pay_done = 0;
}

/* Send side: header, then the payload inline (inline_payload). */
static int send_step(struct nsock_comm *c, struct nsock_req *r, int *err)
{
    if (!c->hdr_ready) {
        struct zn_nsock_hdr h = { .tag = r->tag[0], .size = r->size[0] };
        zn_nsock_hdr_encode(&h, c->hdr);
        c->hdr_ready = 1;
    }
    size_t n = 0, inline_len = inline_payload(c, r->size[0]) ? r->size[0] : 0;
    if (c->hdr_done < ZN_NSOCK_HDR_LEN) {
        /* With the inline payload in the same call: no segment of its own for the header. */
        size_t left = ZN_NSOCK_HDR_LEN - c->hdr_done;
        *err =
            zn_sock_send2_some(c->ctrl_fd, c->hdr + c->hdr_done, left, r->data[0], inline_len, &n);
        c->hdr_done += n < left ? n : left;
        c->pay_done += n > left ? n - left : 0;
        if (*err || c->hdr_done < ZN_NSOCK_HDR_LEN) return n > 0;
    }
    if (c->pay_done < inline_len) {
        *err =
            zn_sock_send_some(c->ctrl_fd, r->data[0] + c->pay_done, inline_len - c->pay_done, &n);
        c->pay_done += n;
        if (*err || c->pay_done < inline_len) return n > 0;
    }
    ctrl_pop(c, r);
    return 1;
}

/* Receive side: match the next header to a buffer of the oldest group, then its payload. */
static int recv_match(struct nsock_comm *c, struct nsock_req *r, ncclResult_t *res)
{
    struct zn_nsock_hdr h;
    int rc = zn_nsock_hdr_decode(c->hdr, ZN_NSOCK_HDR_LEN, NCCL_MAX_NET_SIZE_BYTES, &h);
    if (rc != 0) {
        *res = comm_fail(c, zn_error(ncclRemoteError, ZN_NET,
                                     "socket net: malformed message header from %s (%s)", c->peer,
                                     strerror(-rc)));
        return 0;
    }
    int e = -1;
    for (int i = 0; i < r->n && e < 0; i++)
        if (!r->matched[i] && r->tag[i] == h.tag) e = i;
    if (e < 0) {
        *res = comm_fail(
            c, zn_error(ncclInvalidUsage, ZN_NET,
                        "socket net: a message with tag %d from %s matches no buffer of the "
                        "posted receive",
                        h.tag, c->peer));
        return 0;
    }
    if (h.size > r->cap[e]) {
        *res = comm_fail(
            c, zn_error(ncclInvalidUsage, ZN_NET,
                        "socket net: a message of %llu bytes (tag %d) from %s is larger than the "
                        "posted receive of %zu bytes",
                        (unsigned long long)h.size, h.tag, c->peer, r->cap[e]));
        return 0;
    }
    r->matched[e] = 1;
    r->size[e] = h.size;
    r->nmatched++;
    c->cur_elem = e;
    c->hdr_ready = 1;
    if (!inline_payload(c, h.size)) queue_chunks(c, r, r->data[e], h.size);
    return 1;
}

static int recv_step(struct nsock_comm *c, struct nsock_req *r, int *err, ncclResult_t *res)
{
    size_t n = 0;
    if (!c->hdr_ready) {
        *err =
            zn_sock_recv_some(c->ctrl_fd, c->hdr + c->hdr_done, ZN_NSOCK_HDR_LEN - c->hdr_done, &n);
        c->hdr_done += n;
        if (*err || c->hdr_done < ZN_NSOCK_HDR_LEN) return n > 0;
        if (!recv_match(c, r, res)) return 0;
    }
    int e = c->cur_elem;
    size_t inline_len = inline_payload(c, r->size[e]) ? r->size[e] : 0;
    if (c->pay_done < inline_len) {
        *err =
            zn_sock_recv_some(c->ctrl_fd, r->data[e] + c->pay_done, inline_len - c->pay_done, &n);
        c->pay_done += n;
        if (*err || c->pay_done < inline_len) return n > 0;
    }
    if (r->nmatched == r->n) {
        ctrl_pop(c, r);
    } else {
        c->hdr_done = 0;
        c->hdr_ready = 0;
        c->pay_done = 0;
    }
    return 1;
}

/* Move the control stream on, but not past `target` once it is done: a peer may close after
 * its last message, and reading ahead for a receive nobody waits on would turn that clean
 * end into an error of the request being tested. */
static ncclResult_t progress(struct nsock_comm *c, const struct nsock_req *target)
{
    for (int rounds = 0; rounds < 64 && c->ohead != c->otail && !target->ctrl_done; rounds++) {
        struct nsock_req *r = &c->reqs[c->order[c->ohead % NSOCK_MAX_REQUESTS]];
        int err = 0;
        ncclResult_t res = ncclSuccess;
        int moved = c->is_send ? send_step(c, r, &err) : recv_step(c, r, &err, &res);
        if (res != ncclSuccess) return res;
        if (err) return comm_error(c, err, c->is_send ? "a send" : "a receive");
        if (!moved) break;
    }
    int herr = atomic_load(&c->error);
    if (herr) return comm_error(c, herr, c->is_send ? "a send" : "a receive");
    return ncclSuccess;
}

ncclResult_t zn_nsock_test(void *request, int *done, int *sizes)
{
    struct nsock_req *r = request;
    struct nsock_comm *c = r->comm;
    *done = 0;
    if (c->failed) return comm_failed(c);
    ZN_CHECK(progress(c, r));
    if (!r->ctrl_done || atomic_load(&r->tasks_left) != 0) return ncclSuccess;
    *done = 1;
    if (sizes)
        for (int i = 0; i < r->n; i++) sizes[i] = (int)r->size[i];
    r->used = 0;
    return ncclSuccess;
}
