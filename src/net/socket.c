/*
 * zinc's socket net as an ncclNet_t (v12): devices, listen, connect, accept, close and
 * memory registration. The data path (isend / irecv / test, helper threads) is in
 * socket_data.c; the wire formats in socket_wire.c.
 *
 * One device: the interface util/sock.c picks from ZINC_SOCKET_IFNAME / ZINC_SOCKET_FAMILY, the
 * same one bootstrap uses, so a net connection and the rendezvous take the same path.
 */
#include "net/net_layer.h"
#include "net/socket_internal.h"
#include "util/clock.h"
#include "util/err.h"
#include "util/hmac.h"
#include "util/log.h"
#include "util/param.h"

#include <errno.h>
#include <limits.h>
#include <net/if.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#define NSOCK_GROUPS 16 /* connections whose streams are still arriving */

/* ZINC_SOCKET_NTHREADS=-1 (the default): two helper threads where the process may run on 8 or
 * more CPUs. NCCL keeps the payload on the control stream outside known clouds; on 2 H200 with
 * 16 cores, an allreduce across two "hosts" over loopback took 2163 us at 16 MB with 2 threads
 * against 6000 for NCCL's default (5589 for zinc without threads). On 2 cores helper threads
 * compete with the ranks' own progress and were slower, hence none there. */
static int auto_threads(void)
{
    cpu_set_t set;
    int ncpu = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set)
                                                            : (int)sysconf(_SC_NPROCESSORS_ONLN);
    return ncpu >= 8 ? 2 : 0;
}

void zn_nsock_config(int *nthreads, int *nsocks_per_thread)
{
    const struct zn_params *p = zn_params();
    int64_t nt = p->socket_nthreads, ns = p->nsocks_perthread;
    if (nt < 0) nt = auto_threads();
    if (nt > NSOCK_MAX_THREADS) nt = NSOCK_MAX_THREADS;
    if (ns < 1) ns = 1;
    if (nt > 0 && nt * ns > NSOCK_MAX_SOCKETS) ns = NSOCK_MAX_SOCKETS / nt;
    *nthreads = (int)nt;
    *nsocks_per_thread = (int)ns;
}

struct nsock_ctx {
    int trafficClass; /* kept for a later use; TCP ignores it */
};

static ncclResult_t nsock_init(void **ctx, uint64_t comm_id, ncclNetCommConfig_t *config,
                               ncclDebugLogger_t log, ncclProfilerCallback_t prof)
{
    struct nsock_ctx *c;
    ZN_CHECK(zn_calloc(&c, 1, "socket net context"));
    c->trafficClass = config ? config->trafficClass : NCCL_NET_TRAFFIC_CLASS_UNDEF;
    *ctx = c;
    return ncclSuccess;
}

static ncclResult_t nsock_finalize(void *ctx)
{
    free(ctx);
    return ncclSuccess;
}

static ncclResult_t nsock_devices(int *ndev)
{
    union zn_sockaddr a;
    char ifname[IF_NAMESIZE + 1];
    *ndev = zn_sock_local_addr(&a, ifname, sizeof(ifname)) == 0 ? 1 : 0;
    return ncclSuccess;
}

static ncclResult_t check_dev(int dev)
{
    int n;
    nsock_devices(&n);
    if (dev < 0 || dev >= n)
        return zn_error(ncclInvalidArgument, ZN_NET,
                        "socket net: device %d does not exist (%d devices)", dev, n);
    return ncclSuccess;
}

/* Link speed in Mb/s from sysfs; 10 Gb/s when the interface does not say (loopback, veth). */
static int if_speed(const char *ifname)
{
    char path[128];
    snprintf(path, sizeof(path), "/sys/class/net/%s/speed", ifname);
    FILE *f = fopen(path, "r");
    int speed = 0;
    if (f) {
        if (fscanf(f, "%d", &speed) != 1) speed = 0;
        fclose(f);
    }
    return speed > 0 ? speed : 10000;
}

static ncclResult_t nsock_get_properties(int dev, ncclNetProperties_t *props)
{
    static char name[IF_NAMESIZE + 1];
    union zn_sockaddr a;
    ZN_CHECK(check_dev(dev));
    zn_sock_local_addr(&a, name, sizeof(name));
    *props = (ncclNetProperties_t){
        .name = name,
        .pciPath = NULL,
        .guid = (uint64_t)dev,
        .ptrSupport = NCCL_PTR_HOST,
        .regIsGlobal = 1, /* registration records nothing, so any comm may use it */
        .forceFlush = 0,
        .speed = if_speed(name),
        .port = 0,
        .latency = 0,
        .maxComms = 65536,
        .maxRecvs = NSOCK_MAX_RECVS,
        .netDeviceType = NCCL_NET_DEVICE_HOST,
        .netDeviceVersion = NCCL_NET_DEVICE_INVALID_VERSION,
        .vProps = { .ndevs = 1, .devs = { dev } },
        .maxP2pBytes = NCCL_MAX_NET_SIZE_BYTES,
        .maxCollBytes = NCCL_MAX_NET_SIZE_BYTES,
        .maxMultiRequestSize = 1,
        /* A TCP interface says nothing of the switches behind it (NCCL's socket net agrees). */
        .railId = NCCL_NET_ID_UNDEF,
        .planeId = NCCL_NET_ID_UNDEF,
    };
    return ncclSuccess;
}

/* ------------------------------------------------------------------------------------------ */
/* listen / accept                                                                            */
/* ------------------------------------------------------------------------------------------ */

struct nsock_pending {
    int fd;
    uint8_t buf[ZN_NSOCK_HELLO_LEN];
    size_t got;
    int64_t deadline;
    char from[ZN_SOCKADDR_STRLEN];
};

struct nsock_group {
    int used;
    uint64_t conn_id;
    int nstreams, have;
    int fds[ZN_NSOCK_MAX_STREAMS];
    int64_t deadline; /* a connection whose streams do not all arrive by then is dropped */
};

struct nsock_listen {
    int fd;
    uint64_t magic;
    uint8_t key[ZN_NSOCK_KEY_LEN]; /* in the handle; what a stream's hello proves */
    struct zn_nonce_set seen;      /* nonces of the hellos taken: each is taken once */
    int nstreams;
    char addr[ZN_SOCKADDR_STRLEN];
    /* Accepted streams whose hello has not been read yet: any number, each with its own
     * deadline, so that strangers never crowd a real peer out. */
    struct nsock_pending *pend;
    int npend, pcap;
    struct nsock_group groups[NSOCK_GROUPS];
};

static ncclResult_t nsock_listen(void *ctx, int dev, void *handle, void **listen_comm)
{
    ZN_CHECK(check_dev(dev));
    struct nsock_listen *l;
    ZN_CHECK(zn_calloc(&l, 1, "socket net listener"));
    union zn_sockaddr local, bound;
    char ifname[IF_NAMESIZE + 1];
    int rc = zn_sock_local_addr(&local, ifname, sizeof(ifname));
    if (rc == 0) rc = zn_sock_listen(&local, &l->fd, &bound);
    if (rc != 0) {
        free(l);
        return zn_error(ncclSystemError, ZN_NET, "socket net: cannot listen: %s", strerror(-rc));
    }
    if (getrandom(&l->magic, sizeof(l->magic), 0) != sizeof(l->magic) ||
        getrandom(l->key, sizeof(l->key), 0) != sizeof(l->key)) {
        close(l->fd);
        free(l);
        return zn_error(ncclSystemError, ZN_NET, "socket net: getrandom failed: %s",
                        strerror(errno));
    }
    int nt, ns;
    zn_nsock_config(&nt, &ns);
    l->nstreams = nt * ns;
    zn_sockaddr_str(&bound, l->addr, sizeof(l->addr));
    struct zn_nsock_handle h = { .tag = ZN_NSOCK_HANDLE_TAG,
                                 .version = ZN_NSOCK_VERSION,
                                 .nstreams = (uint16_t)l->nstreams,
                                 .magic = l->magic,
                                 .addr = bound };
    memcpy(h.key, l->key, sizeof(h.key));
    zn_nsock_handle_encode(&h, handle);
    zn_info(ZN_NET, "socket net: listening on %s (%s), %d data streams per connection", l->addr,
            ifname, l->nstreams);
    *listen_comm = l;
    return ncclSuccess;
}

static void drop_pending(struct nsock_listen *l, int i, int close_fd)
{
    if (close_fd) close(l->pend[i].fd);
    l->pend[i] = l->pend[--l->npend];
}

/* Take every connection waiting on the listening socket. */
static void take_new(struct nsock_listen *l)
{
    for (;;) {
        int fd;
        if (zn_sock_try_accept(l->fd, &fd) != 0) return;
        union zn_sockaddr addr;
        socklen_t len = sizeof(addr);
        char from[ZN_SOCKADDR_STRLEN] = "?";
        if (getpeername(fd, &addr.sa, &len) == 0) zn_sockaddr_str(&addr, from, sizeof(from));
        if (l->npend == l->pcap) {
            int cap = l->pcap ? 2 * l->pcap : 16;
            struct nsock_pending *n = realloc(l->pend, (size_t)cap * sizeof(*n));
            if (!n) {
                zn_warn(ZN_NET, "socket net %s: out of memory; closing the connection from %s",
                        l->addr, from);
                close(fd);
                continue;
            }
            l->pend = n;
            l->pcap = cap;
        }
        struct nsock_pending *p = &l->pend[l->npend];
        memcpy(p->from, from, sizeof(from));
        p->fd = fd;
        p->got = 0;
        p->deadline = zn_deadline_from_now();
        l->npend++;
    }
}

/* File a stream that presented a valid hello under its connection; 1 if it was kept. */
static int file_stream(struct nsock_listen *l, const struct zn_nsock_hello *h, int fd)
{
    struct nsock_group *g = NULL, *free_g = NULL;
    for (int i = 0; i < NSOCK_GROUPS; i++) {
        if (l->groups[i].used && l->groups[i].conn_id == h->conn_id) g = &l->groups[i];
        if (!l->groups[i].used && !free_g) free_g = &l->groups[i];
    }
    if (!g) {
        if (!free_g || h->nstreams != l->nstreams) return 0;
        g = free_g;
        memset(g, 0, sizeof(*g));
        g->used = 1;
        g->conn_id = h->conn_id;
        g->nstreams = h->nstreams;
        g->deadline = zn_deadline_from_now();
        for (int i = 0; i < ZN_NSOCK_MAX_STREAMS; i++) g->fds[i] = -1;
    }
    if (h->nstreams != g->nstreams || g->fds[h->stream] >= 0) return 0;
    g->fds[h->stream] = fd;
    g->have++;
    return 1;
}

/* Read hellos; reject streams that do not prove this listener's key. */
static void read_hellos(struct nsock_listen *l)
{
    for (int i = l->npend - 1; i >= 0; i--) {
        struct nsock_pending *p = &l->pend[i];
        size_t n = 0;
        int rc = zn_sock_recv_some(p->fd, p->buf + p->got, ZN_NSOCK_HELLO_LEN - p->got, &n);
        p->got += n;
        if (rc == 0 && p->got < ZN_NSOCK_HELLO_LEN) {
            if (zn_now_ns() > p->deadline) {
                zn_warn(
                    ZN_NET,
                    "socket net %s: closing the connection from %s: no hello within ZINC_TIMEOUT",
                    l->addr, p->from);
                drop_pending(l, i, 1);
            }
            continue;
        }
        if (rc != 0) {
            zn_info(ZN_NET, "socket net %s: connection from %s closed before its hello: %s",
                    l->addr, p->from, strerror(-rc));
            drop_pending(l, i, 1);
            continue;
        }
        struct zn_nsock_hello h;
        rc = zn_nsock_hello_decode(p->buf, p->got, l->magic, &h);
        if (rc == 0 && !zn_nsock_hello_verify(p->buf, l->key)) rc = -EPERM;
        if (rc == 0 && zn_nonce_seen(&l->seen, h.nonce) != 0) rc = -EALREADY;
        if (rc != 0 || !file_stream(l, &h, p->fd)) {
            zn_warn(ZN_NET, "socket net %s: rejected a connection from %s: %s", l->addr, p->from,
                    rc == -EACCES     ? "it did not present this listener's magic"
                    : rc == -EPERM    ? "it did not prove this listener's key"
                    : rc == -EALREADY ? "it replayed a hello already taken"
                    : rc != 0         ? "its hello is malformed"
                                      : "its stream numbers do not fit a connection");
            drop_pending(l, i, 1);
            continue;
        }
        drop_pending(l, i, 0);
    }
}

static ncclResult_t comm_new(int is_send, int ctrl_fd, int nstreams, const int *data_fds,
                             const char *peer, struct nsock_comm **out)
{
    struct nsock_comm *c;
    ZN_CHECK(zn_calloc(&c, 1, "socket net comm"));
    c->is_send = is_send;
    c->ctrl_fd = ctrl_fd;
    snprintf(c->peer, sizeof(c->peer), "%s", peer);
    c->nstreams = nstreams;
    if (nstreams > 0) {
        ncclResult_t r = zn_calloc(&c->streams, (size_t)nstreams, "socket net streams");
        if (r != ncclSuccess) {
            free(c);
            return r;
        }
        for (int i = 0; i < nstreams; i++) c->streams[i].fd = data_fds[i];
    }
    *out = c;
    return ncclSuccess;
}

/* Drop connections of which some streams never came (the connecting side died half-way). */
static void drop_stale_groups(struct nsock_listen *l)
{
    int64_t now = zn_now_ns();
    for (int i = 0; i < NSOCK_GROUPS; i++) {
        struct nsock_group *g = &l->groups[i];
        if (!g->used || g->have == g->nstreams + 1 || now <= g->deadline) continue;
        zn_warn(ZN_NET,
                "socket net %s: dropping a connection that brought %d of its %d streams within "
                "ZINC_TIMEOUT",
                l->addr, g->have, g->nstreams + 1);
        for (int s = 0; s <= g->nstreams; s++)
            if (g->fds[s] >= 0) close(g->fds[s]);
        g->used = 0;
    }
}

static ncclResult_t nsock_accept(void *listen_comm, void **recv_comm, ncclNetDeviceHandle_t **dev)
{
    struct nsock_listen *l = listen_comm;
    *recv_comm = NULL;
    take_new(l);
    read_hellos(l);
    drop_stale_groups(l);
    for (int i = 0; i < NSOCK_GROUPS; i++) {
        struct nsock_group *g = &l->groups[i];
        if (!g->used || g->have != g->nstreams + 1) continue;
        union zn_sockaddr from;
        socklen_t len = sizeof(from);
        char peer[ZN_SOCKADDR_STRLEN] = "?";
        if (getpeername(g->fds[0], &from.sa, &len) == 0) zn_sockaddr_str(&from, peer, sizeof(peer));
        struct nsock_comm *c;
        ZN_CHECK(comm_new(0, g->fds[0], g->nstreams, g->fds + 1, peer, &c));
        g->used = 0;
        ncclResult_t r = zn_nsock_threads_start(c);
        if (r != ncclSuccess) {
            zn_nsock_comm_free(c);
            return r;
        }
        zn_info(ZN_NET, "socket net %s: accepted a connection from %s", l->addr, peer);
        *recv_comm = c;
        return ncclSuccess;
    }
    return ncclSuccess;
}

static ncclResult_t nsock_close_listen(void *listen_comm)
{
    struct nsock_listen *l = listen_comm;
    for (int i = 0; i < l->npend; i++) close(l->pend[i].fd);
    free(l->pend);
    zn_nonce_set_free(&l->seen);
    for (int i = 0; i < NSOCK_GROUPS; i++)
        for (int s = 0; l->groups[i].used && s <= l->groups[i].nstreams; s++)
            if (l->groups[i].fds[s] >= 0) close(l->groups[i].fds[s]);
    close(l->fd);
    free(l);
    return ncclSuccess;
}

/* ------------------------------------------------------------------------------------------ */
/* connect: non-blocking; the state lives behind a pointer stored in the caller's handle       */
/* ------------------------------------------------------------------------------------------ */

#define NSOCK_STAGE_OFF (NCCL_NET_HANDLE_MAXSIZE - sizeof(void *))

struct nsock_connecting {
    struct zn_nsock_handle h;
    int nfds;
    int fds[ZN_NSOCK_MAX_STREAMS];
    int connected[ZN_NSOCK_MAX_STREAMS];
    size_t sent[ZN_NSOCK_MAX_STREAMS];
    uint8_t hello[ZN_NSOCK_MAX_STREAMS][ZN_NSOCK_HELLO_LEN];
    int64_t deadline;
    char peer[ZN_SOCKADDR_STRLEN];
};

static void connecting_free(struct nsock_connecting *st, int close_fds)
{
    for (int i = 0; close_fds && i < st->nfds; i++)
        if (st->fds[i] >= 0) close(st->fds[i]);
    free(st);
}

static ncclResult_t connecting_new(const void *handle, struct nsock_connecting **out)
{
    struct zn_nsock_handle h;
    if (zn_nsock_handle_decode(handle, NSOCK_STAGE_OFF, &h) != 0)
        return zn_error(ncclInvalidArgument, ZN_NET,
                        "socket net: connect was given a handle that no socket-net listener made");
    struct nsock_connecting *st;
    ZN_CHECK(zn_calloc(&st, 1, "socket net connect state"));
    st->h = h;
    st->nfds = h.nstreams + 1;
    st->deadline = zn_deadline_from_now();
    zn_sockaddr_str(&h.addr, st->peer, sizeof(st->peer));
    uint64_t conn_id;
    if (getrandom(&conn_id, sizeof(conn_id), 0) != sizeof(conn_id)) conn_id = (uint64_t)zn_now_ns();
    for (int i = 0; i < st->nfds; i++) {
        st->fds[i] = -1;
        struct zn_nsock_hello hello = {
            .stream = (uint16_t)i, .nstreams = h.nstreams, .magic = h.magic, .conn_id = conn_id
        };
        if (getrandom(hello.nonce, sizeof(hello.nonce), 0) != sizeof(hello.nonce)) {
            connecting_free(st, 0);
            return zn_error(ncclSystemError, ZN_NET, "socket net: getrandom: %s", strerror(errno));
        }
        zn_nsock_hello_encode(&hello, h.key, st->hello[i]);
    }
    for (int i = 0; i < st->nfds; i++) {
        int rc = zn_sock_connect_start(&h.addr, &st->fds[i]);
        if (rc != 0) {
            connecting_free(st, 1);
            return zn_error(ncclRemoteError, ZN_NET, "socket net: connect to %s failed: %s",
                            st->peer, strerror(-rc));
        }
    }
    *out = st;
    return ncclSuccess;
}

/* Advance every stream; 1 when all are connected and have sent their hello. */
static int connecting_step(struct nsock_connecting *st, int *err)
{
    int ready = 0;
    *err = 0;
    for (int i = 0; i < st->nfds; i++) {
        if (!st->connected[i]) {
            int rc = zn_sock_connect_done(st->fds[i]);
            if (rc < 0) {
                *err = rc;
                return 0;
            }
            if (rc == 0) continue;
            st->connected[i] = 1;
            zn_sock_tune(st->fds[i], 0); /* keep the kernel's buffer autotuning */
        }
        size_t n = 0;
        int rc = zn_sock_send_some(st->fds[i], st->hello[i] + st->sent[i],
                                   ZN_NSOCK_HELLO_LEN - st->sent[i], &n);
        if (rc < 0) {
            *err = rc;
            return 0;
        }
        st->sent[i] += n;
        ready += st->sent[i] == ZN_NSOCK_HELLO_LEN;
    }
    return ready == st->nfds;
}

static ncclResult_t nsock_connect(void *ctx, int dev, void *handle, void **send_comm,
                                  ncclNetDeviceHandle_t **dev_comm)
{
    *send_comm = NULL;
    struct nsock_connecting *st;
    memcpy(&st, (char *)handle + NSOCK_STAGE_OFF, sizeof(st));
    if (!st) {
        ZN_CHECK(connecting_new(handle, &st));
        memcpy((char *)handle + NSOCK_STAGE_OFF, &st, sizeof(st));
    }
    int err;
    int ready = connecting_step(st, &err);
    if (!ready && !err && zn_now_ns() > st->deadline) err = -ETIMEDOUT;
    if (err) {
        memset((char *)handle + NSOCK_STAGE_OFF, 0, sizeof(st));
        ncclResult_t r = zn_error(ncclRemoteError, ZN_NET, "socket net: connect to %s failed: %s",
                                  st->peer, strerror(-err));
        connecting_free(st, 1);
        return r;
    }
    if (!ready) return ncclSuccess;
    struct nsock_comm *c;
    ncclResult_t r = comm_new(1, st->fds[0], st->nfds - 1, st->fds + 1, st->peer, &c);
    if (r == ncclSuccess) {
        r = zn_nsock_threads_start(c);
        if (r != ncclSuccess) {
            c->nstreams = 0; /* the fds are closed below, with the state */
            c->ctrl_fd = -1;
            zn_nsock_comm_free(c);
        }
    }
    memset((char *)handle + NSOCK_STAGE_OFF, 0, sizeof(st));
    connecting_free(st, r != ncclSuccess);
    if (r == ncclSuccess) *send_comm = c;
    return r;
}

static ncclResult_t nsock_close(void *comm)
{
    if (comm) zn_nsock_comm_free(comm);
    return ncclSuccess;
}

/* ------------------------------------------------------------------------------------------ */
/* Memory: host memory needs no registration; everything else is refused clearly.             */
/* ------------------------------------------------------------------------------------------ */

static char nsock_host_mr; /* every host registration returns this marker */

static ncclResult_t nsock_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle)
{
    if (type != NCCL_PTR_HOST)
        return zn_error(
            ncclInvalidUsage, ZN_NET,
            "socket net: cannot register memory of type %d (only NCCL_PTR_HOST: the socket net "
            "moves data with send/recv on host memory; stage GPU buffers through host memory)",
            type);
    *mhandle = &nsock_host_mr;
    return ncclSuccess;
}

static ncclResult_t nsock_reg_mr_dmabuf(void *comm, void *data, size_t size, int type,
                                        uint64_t offset, int fd, void **mhandle)
{
    return zn_error(
        ncclInvalidUsage, ZN_NET,
        "socket net: DMA-BUF registration is not supported (ptrSupport is NCCL_PTR_HOST)");
}

static ncclResult_t nsock_dereg_mr(void *comm, void *mhandle)
{
    return ncclSuccess;
}

static ncclResult_t nsock_iflush(void *comm, int n, void **data, int *sizes, void **mh,
                                 void **request)
{
    *request = NULL; /* host memory: the data is visible once test() reported it */
    return ncclSuccess;
}

static ncclResult_t nsock_get_device_mr(void *comm, void *mhandle, void **dptr)
{
    return zn_error(ncclInvalidUsage, ZN_NET,
                    "socket net: no device offload (getDeviceMr is not supported)");
}

/* NCCL calls this for every completed receive whenever the table has it (it does not check for
 * device offload first): the receive released everything when test() said done, so nothing is
 * left to release. The request is not looked at: it may already be gone. */
static ncclResult_t nsock_irecv_consumed(void *comm, int n, void *request)
{
    return ncclSuccess;
}

/* A virtual device of one physical device is that device (a caller may ask for one per NIC);
 * merging several is not supported: the socket net has one device. */
static ncclResult_t nsock_make_vdevice(int *d, ncclNetVDeviceProps_t *props)
{
    if (props->ndevs != 1)
        return zn_error(
            ncclInvalidUsage, ZN_NET,
            "socket net: cannot merge %d devices into a virtual device (it has one device)",
            props->ndevs);
    ZN_CHECK(check_dev(props->devs[0]));
    *d = props->devs[0];
    return ncclSuccess;
}

static ncclResult_t nsock_set_net_attr(void *ctx, ncclNetAttr_t *attr)
{
    return ncclSuccess; /* traffic hints: TCP has nothing to tune per communicator */
}

const ncclNet_t zn_net_socket = {
    .name = "Socket",
    .init = nsock_init,
    .devices = nsock_devices,
    .getProperties = nsock_get_properties,
    .listen = nsock_listen,
    .connect = nsock_connect,
    .accept = nsock_accept,
    .regMr = nsock_reg_mr,
    .regMrDmaBuf = nsock_reg_mr_dmabuf,
    .deregMr = nsock_dereg_mr,
    .isend = zn_nsock_isend,
    .irecv = zn_nsock_irecv,
    .iflush = nsock_iflush,
    .test = zn_nsock_test,
    .closeSend = nsock_close,
    .closeRecv = nsock_close,
    .closeListen = nsock_close_listen,
    .getDeviceMr = nsock_get_device_mr,
    .irecvConsumed = nsock_irecv_consumed,
    .makeVDevice = nsock_make_vdevice,
    .finalize = nsock_finalize,
    .setNetAttr = nsock_set_net_attr,
};
