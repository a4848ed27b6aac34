/*
 * The shm transport's one-sided table (zn_shm_rma): puts and signals between processes of one
 * host, issued by host threads, on their own (a domain per caller: libmscclpp's SHM
 * connections). shm's main-table connections carry messages only.
 *
 * Memory. mem_alloc makes a zinc shared-memory segment (util/shm.c) that each peer maps once
 * per domain, whatever number of regions and connections use it; puts into it are plain
 * stores. Any other memory of the process (malloc, a stack array, a file mapping) can be a
 * region too: its key is (pid, address), and the peer's puts into it are process_vm_writev
 * calls (cross-memory attach, as Open MPI's windows do); a put reads its own source with plain
 * loads either way. The kernel allows cross-memory attach only where ptrace would be allowed
 * (Yama's ptrace_scope, same user, container seccomp profiles), so key_import probes it with a
 * 1-byte read of the peer and a refusal fails with the reason, printed to stderr once besides
 * the log (a program that replaced the log handler still learns why).
 *
 * Signals are release stores into the peer's word (in a segment), so the puts before them are
 * visible to a reader that sees the value with acquire order; flush is a full fence: every put
 * is complete when it returns.
 *
 * Names. Segments are named from the communicator's hash, the rank and a counter; the name is
 * unlinked once every expected process mapped it (util/shm.c), or by its creator when it frees
 * it, so a job killed after setup leaves nothing in /dev/shm.
 */
#include "transport.h"
#include "util/clock.h"
#include "util/err.h"
#include "util/shm.h"
#include "util/size.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#define SEG_NAME_MAX 96

/* A segment this rank made (own) or a peer's mapped here. */
struct shm_seg {
    struct zn_shm_seg seg;
    int creator;
    struct shm_seg *next;
};

/* A region of this rank: in one of its segments (seg), or other memory of the process. */
struct shm_region {
    struct shm_seg *seg; /* NULL: reached by peers with cross-memory attach */
    uint8_t *base;
    size_t len;
    int owns_seg; /* made by mem_alloc: mem_free unmaps it */
    struct shm_region *next;
};

/* A peer's region as this rank reaches it. */
struct shm_remote {
    uint8_t *ptr; /* NULL: memory of process pid at addr (cross-memory attach) */
    int pid;
    uint64_t addr;
    size_t len;
    int owner;
    struct shm_remote *next;
};

struct shm_ep {
    struct zn_conn_hdr hdr;
    struct shm_dom *d;
    int tag;
    struct shm_ep *next;
};

struct shm_dom {
    struct zn_tctx ctx;
    struct shm_seg *own, *peer; /* made here; peers' mapped here */
    struct shm_region *regions; /* every region (mem_alloc's and mem_reg's) */
    struct shm_remote *remotes;
    struct shm_ep *eps;
    int nsegs; /* segments made so far: names them */
};

/* The key, as the peer receives it. An empty seg says the region is in no segment: it is addr
 * in process pid. */
struct shm_key {
    char seg[SEG_NAME_MAX];
    uint64_t seg_size;
    uint64_t off; /* of the region in the segment */
    uint64_t len;
    uint64_t addr;
    int32_t pid;
    uint32_t owner;
};
_Static_assert(sizeof(struct shm_key) <= ZN_RMA_KEY_MAX, "an shm key fits in zn_rma_key");

static void seg_prefix(const struct shm_dom *d, int rank, char *buf, size_t len)
{
    snprintf(buf, len, "/zn-rma-%016llx-%d-", (unsigned long long)d->ctx.comm_hash, rank);
}

static ncclResult_t dom_open(const struct zn_tctx *ctx, void **dom)
{
    struct shm_dom *d;
    ZN_CHECK(zn_calloc(&d, 1, "shm one-sided domain"));
    d->ctx = *ctx;
    *dom = d;
    return ncclSuccess;
}

static void seg_list_free(struct shm_seg **list)
{
    while (*list) {
        struct shm_seg *s = *list;
        *list = s->next;
        zn_shm_detach(&s->seg);
        free(s);
    }
}

static void dom_close(void *dom)
{
    struct shm_dom *d = dom;
    if (!d) return;
    while (d->eps) {
        struct shm_ep *e = d->eps;
        d->eps = e->next;
        free(e);
    }
    while (d->regions) {
        struct shm_region *r = d->regions;
        d->regions = r->next;
        free(r);
    }
    while (d->remotes) {
        struct shm_remote *r = d->remotes;
        d->remotes = r->next;
        free(r);
    }
    seg_list_free(&d->peer);
    seg_list_free(&d->own);
    free(d);
}

static ncclResult_t mem_alloc(void *dom, size_t len, int nmappers, void **ptr, void **handle)
{
    struct shm_dom *d = dom;
    struct shm_seg *s;
    struct shm_region *r;
    ZN_CHECK(zn_calloc(&s, 1, "shm segment"));
    ncclResult_t res = zn_calloc(&r, 1, "shm region");
    if (res != ncclSuccess) goto free_seg;
    char name[SEG_NAME_MAX], prefix[64];
    seg_prefix(d, d->ctx.rank, prefix, sizeof(prefix));
    snprintf(name, sizeof(name), "%s%d", prefix, d->nsegs);
    res = zn_shm_create(name, len, nmappers, &s->seg);
    if (res != ncclSuccess) goto free_region;
    d->nsegs++;
    memset(s->seg.base, 0, len);
    s->creator = d->ctx.rank;
    s->next = d->own;
    d->own = s;
    *r = (struct shm_region){
        .seg = s, .base = s->seg.base, .len = len, .owns_seg = 1, .next = d->regions
    };
    d->regions = r;
    *ptr = s->seg.base;
    *handle = r;
    return ncclSuccess;
free_region:
    free(r);
free_seg:
    free(s);
    return res;
}

static void region_unlink(struct shm_dom *d, struct shm_region *r)
{
    for (struct shm_region **pp = &d->regions; *pp; pp = &(*pp)->next)
        if (*pp == r) {
            *pp = r->next;
            return;
        }
}

static void mem_free(void *dom, void *handle)
{
    struct shm_dom *d = dom;
    struct shm_region *r = handle;
    if (!r) return;
    region_unlink(d, r);
    if (r->owns_seg)
        for (struct shm_seg **pp = &d->own; *pp; pp = &(*pp)->next)
            if (*pp == r->seg) {
                *pp = r->seg->next;
                zn_shm_detach(&r->seg->seg);
                free(r->seg);
                break;
            }
    free(r);
}

/* In one of this rank's segments (within it), or other memory mapped throughout. */
static ncclResult_t mem_reg(void *dom, void *buf, size_t len, void **handle)
{
    struct shm_dom *d = dom;
    struct shm_seg *in = NULL;
    for (struct shm_seg *s = d->own; s; s = s->next) {
        uintptr_t base = (uintptr_t)s->seg.base, p = (uintptr_t)buf;
        if (p < base || p >= base + s->seg.size) continue;
        if (len > base + s->seg.size - p)
            return zn_error(ncclInvalidArgument, ZN_SHM,
                            "shm: region %p + %zu bytes runs past the end of its segment (%zu "
                            "bytes at %p)",
                            buf, len, s->seg.size, s->seg.base);
        in = s;
        break;
    }
    if (!in && !zn_host_range_mapped(buf, len))
        return zn_error(ncclInvalidArgument, ZN_SHM,
                        "shm: region %p + %zu bytes is not host memory of this process", buf, len);
    struct shm_region *r;
    ZN_CHECK(zn_calloc(&r, 1, "shm region"));
    *r = (struct shm_region){ .seg = in, .base = buf, .len = len, .next = d->regions };
    d->regions = r;
    *handle = r;
    return ncclSuccess;
}

static void mem_dereg(void *dom, void *handle)
{
    struct shm_region *r = handle;
    if (!r || r->owns_seg) return;
    region_unlink(dom, r);
    free(r);
}

static ncclResult_t key_pack(void *dom, void *handle, struct zn_rma_key *key)
{
    struct shm_dom *d = dom;
    const struct shm_region *r = handle;
    if (!r) return zn_error(ncclInvalidArgument, ZN_SHM, "shm: key_pack of a NULL region");
    struct shm_key k = { .len = r->len, .owner = (uint32_t)d->ctx.rank };
    if (r->seg) {
        snprintf(k.seg, sizeof(k.seg), "%s", r->seg->seg.name);
        k.seg_size = r->seg->seg.size;
        k.off = (uint64_t)(r->base - (uint8_t *)r->seg->seg.base);
    } else {
        k.pid = (int32_t)getpid();
        k.addr = (uint64_t)(uintptr_t)r->base;
    }
    memset(key, 0, sizeof(*key));
    key->size = sizeof(k);
    memcpy(key->data, &k, sizeof(k));
    return ncclSuccess;
}

/* Map a peer's segment once per domain. */
static ncclResult_t seg_attach(struct shm_dom *d, int peer, const char *name, uint64_t size,
                               struct shm_seg **out)
{
    for (struct shm_seg *s = d->peer; s; s = s->next)
        if (s->creator == peer && !strcmp(s->seg.name, name)) {
            *out = s;
            return ncclSuccess;
        }
    char prefix[64];
    seg_prefix(d, peer, prefix, sizeof(prefix));
    if (strncmp(name, prefix, strlen(prefix)) != 0)
        return zn_error(ncclRemoteError, ZN_SHM,
                        "shm: rank %d named a segment outside its namespace", peer);
    struct shm_seg *s;
    ZN_CHECK(zn_calloc(&s, 1, "shm segment"));
    int rc = zn_shm_attach(name, size, zn_deadline_from_now(), d->ctx.abort_flag, &s->seg);
    if (rc != 0) {
        char who[160];
        zn_peer_str(&d->ctx, peer, who, sizeof(who));
        free(s);
        return zn_error(ncclRemoteError, ZN_SHM, "cannot map %s's shared memory %s: %s", who, name,
                        strerror(-rc));
    }
    s->creator = peer;
    s->next = d->peer;
    d->peer = s;
    *out = s;
    return ncclSuccess;
}

/* Printed to stderr once per process as well as logged. */
static atomic_int cma_refusal_printed;

static ncclResult_t cma_refused(struct shm_dom *d, int peer, int err)
{
    char who[160];
    zn_peer_str(&d->ctx, peer, who, sizeof(who));
    const char *fix =
        err == ENOSYS ? "this kernel or its seccomp profile does not provide process_vm_readv/"
                        "writev (a container profile must allow them)"
        : err == EPERM
            ? "ptrace access to the peer is refused (Yama: set /proc/sys/kernel/yama/ptrace_scope "
              "to 0 or give the ranks CAP_SYS_PTRACE; the ranks must run as one user; a "
              "container's seccomp profile must allow process_vm_readv/writev)"
            : "the peer's buffer could not be read";
    char msg[768];
    snprintf(msg, sizeof(msg),
             "SHM connection to %s: the peer's buffer is not in shared memory (zincConnMemAlloc), "
             "so puts must use cross-memory attach (process_vm_writev), and the kernel refuses it "
             "(%s): %s. Allocate the connection buffers with zincConnMemAlloc instead, or allow "
             "cross-memory attach",
             who, strerror(err), fix);
    if (!atomic_exchange(&cma_refusal_printed, 1)) fprintf(stderr, "zinc: %s\n", msg);
    return zn_error(ncclSystemError, ZN_SHM, "%s", msg);
}

/* The peer's region is plain memory of its process: check that the pid is the peer's own and
 * that the kernel lets this process reach it. */
static ncclResult_t cma_attach(struct shm_dom *d, int peer, const struct shm_key *k)
{
    const struct zn_peer_info *me = &d->ctx.peers[d->ctx.rank], *them = &d->ctx.peers[peer];
    if (k->pid <= 0 || k->pid != them->pid || k->addr == 0 || k->addr + k->len < k->addr)
        return zn_error(ncclRemoteError, ZN_SHM,
                        "shm: the key from rank %d is inconsistent (pid %d, rank %d's pid is %d)",
                        peer, (int)k->pid, peer, (int)them->pid);
    /* In another pid namespace the pid names some other process here (peer.c says the same). */
    if (them->host_hash != me->host_hash || !me->pid_ns || them->pid_ns != me->pid_ns)
        return zn_error(ncclInvalidUsage, ZN_SHM,
                        "shm: rank %d's buffer is not in shared memory (zincConnMemAlloc), and "
                        "rank %d runs in another pid namespace, where cross-memory attach cannot "
                        "name it; allocate the connection buffers with zincConnMemAlloc",
                        peer, peer);
    char byte;
    struct iovec l = { &byte, 1 };
    struct iovec r = { (void *)(uintptr_t)k->addr, 1 };
    if (process_vm_readv(k->pid, &l, 1, &r, 1, 0) != 1) {
        int err = errno;
        if (err == ESRCH) {
            char who[160];
            zn_peer_str(&d->ctx, peer, who, sizeof(who));
            return zn_error(ncclRemoteError, ZN_SHM, "connection setup: %s has exited", who);
        }
        return cma_refused(d, peer, err);
    }
    return ncclSuccess;
}

static ncclResult_t key_import(void *dom, int peer, const struct zn_rma_key *key, void **remote)
{
    struct shm_dom *d = dom;
    struct shm_key k;
    if (peer < 0 || peer >= d->ctx.nranks || key->size != sizeof(k))
        return zn_error(ncclRemoteError, ZN_SHM,
                        "shm: a key of %u bytes from rank %d is not an shm key (%zu bytes)",
                        key->size, peer, sizeof(k));
    memcpy(&k, key->data, sizeof(k));
    int cma = k.seg[0] == 0;
    if ((int)k.owner != peer || memchr(k.seg, 0, sizeof(k.seg)) == NULL ||
        (!cma && (k.off > k.seg_size || k.len > k.seg_size - k.off)))
        return zn_error(ncclRemoteError, ZN_SHM, "shm: the key from rank %d is inconsistent", peer);
    struct shm_seg *s = NULL;
    if (cma)
        ZN_CHECK(cma_attach(d, peer, &k));
    else
        ZN_CHECK(seg_attach(d, peer, k.seg, k.seg_size, &s));
    struct shm_remote *r;
    ZN_CHECK(zn_calloc(&r, 1, "shm remote region"));
    *r = (struct shm_remote){ .ptr = s ? (uint8_t *)s->seg.base + k.off : NULL,
                              .pid = cma ? k.pid : 0,
                              .addr = k.addr,
                              .len = k.len,
                              .owner = peer,
                              .next = d->remotes };
    d->remotes = r;
    *remote = r;
    return ncclSuccess;
}

/* The segment stays mapped until the domain closes (other regions may lie in it). */
static ncclResult_t key_release(void *dom, void *remote)
{
    struct shm_dom *d = dom;
    for (struct shm_remote **pp = &d->remotes; *pp; pp = &(*pp)->next)
        if (*pp == remote) {
            *pp = ((struct shm_remote *)remote)->next;
            free(remote);
            break;
        }
    return ncclSuccess;
}

static void *remote_addr(void *remote, size_t *len)
{
    const struct shm_remote *r = remote;
    if (len) *len = r ? r->len : 0;
    return r ? r->ptr : NULL;
}

static ncclResult_t ep_open(void *dom, const struct zn_rma_ep_args *a, struct zn_conn **c,
                            struct zn_rma_key *desc)
{
    struct shm_dom *d = dom;
    if (a->peer < 0 || a->peer >= d->ctx.nranks || a->peer == d->ctx.rank)
        return zn_error(ncclInvalidArgument, ZN_SHM, "shm: no connection to rank %d", a->peer);
    struct shm_ep *e;
    ZN_CHECK(zn_calloc(&e, 1, "shm connection"));
    /* channel -1: a one-sided connection, not one of the main table's. */
    e->hdr = (struct zn_conn_hdr){ .ops = &zn_transport_shm, .peer = a->peer, .channel = -1 };
    e->d = d;
    e->tag = a->tag;
    e->next = d->eps;
    d->eps = e;
    memset(desc, 0, sizeof(*desc));
    *c = (struct zn_conn *)e;
    return ncclSuccess;
}

/* Nothing to exchange: regions travel as keys. */
static ncclResult_t ep_connect(struct zn_conn *c, const struct zn_rma_key *peer_desc,
                               size_t peer_len)
{
    return ncclSuccess;
}

static ncclResult_t ep_establish(struct zn_conn *c, int *done)
{
    *done = 1;
    return ncclSuccess;
}

static void ep_close(struct zn_conn *c)
{
    struct shm_ep *e = (struct shm_ep *)c;
    if (!e) return;
    for (struct shm_ep **pp = &e->d->eps; *pp; pp = &(*pp)->next)
        if (*pp == e) {
            *pp = e->next;
            break;
        }
    free(e);
}

/* Whether [off, off + len) lies inside a region of size bytes (no overflow). */
static int inside(size_t off, size_t len, size_t size)
{
    return off <= size && len <= size - off;
}

static ncclResult_t check_ep(struct shm_ep *e, const void *remote, const char *op)
{
    const struct shm_remote *r = remote;
    if (!e || e->hdr.channel != -1)
        return zn_error(ncclInvalidArgument, ZN_SHM,
                        "shm: %s on a connection that is not a one-sided one (ep_open)", op);
    if (!r || r->owner != e->hdr.peer)
        return zn_error(ncclInvalidArgument, ZN_SHM, "shm: %s toward rank %d with %s", op,
                        e->hdr.peer, r ? "a region of another rank" : "a NULL remote region");
    return ncclSuccess;
}

/* A put into a peer region that is plain memory of the peer's process. The kernel may copy less
 * than asked (a page it could not fault in, or its own limit per call): go on from there, and
 * fail only on an error. A signal after it is a release store after this call returns, so a
 * reader that sees it sees these bytes. */
static ncclResult_t cma_put(struct shm_ep *e, const struct shm_remote *r, size_t roff,
                            const uint8_t *src, size_t size)
{
    size_t done = 0;
    while (done < size) {
        struct iovec l = { (void *)(uintptr_t)(src + done), size - done };
        struct iovec rv = { (void *)(uintptr_t)(r->addr + roff + done), size - done };
        ssize_t n = process_vm_writev(r->pid, &l, 1, &rv, 1, 0);
        if (n > 0) {
            done += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        int err = n < 0 ? errno : EFAULT;
        char who[160];
        zn_peer_str(&e->d->ctx, e->hdr.peer, who, sizeof(who));
        if (err == ESRCH)
            return zn_error(ncclRemoteError, ZN_SHM, "put: %s (connection tag %d) has exited", who,
                            e->tag);
        return zn_error(err == EFAULT ? ncclRemoteError : ncclSystemError, ZN_SHM,
                        "put to %s tag %d: process_vm_writev of %zu bytes at offset %zu of the "
                        "peer's buffer: %s%s",
                        who, e->tag, size - done, roff + done, strerror(err),
                        err == EFAULT ? " (did the peer free or unmap its connection buffer?)"
                                      : "");
    }
    return ncclSuccess;
}

static ncclResult_t put(struct zn_conn *c, void *local, size_t loff, void *remote, size_t roff,
                        size_t len)
{
    struct shm_ep *e = (struct shm_ep *)c;
    const struct shm_region *l = local;
    const struct shm_remote *r = remote;
    ZN_CHECK(check_ep(e, remote, "put"));
    if (!l || !inside(loff, len, l->len) || !inside(roff, len, r->len))
        return zn_error(ncclInvalidArgument, ZN_SHM,
                        "shm: put of %zu bytes from offset %zu to offset %zu leaves a region "
                        "(local %zu, remote %zu bytes)",
                        len, loff, roff, l ? l->len : 0, r->len);
    if (r->ptr) {
        memcpy(r->ptr + roff, l->base + loff, len);
        return ncclSuccess;
    }
    return cma_put(e, r, roff, l->base + loff, len);
}

static ncclResult_t signal(struct zn_conn *c, void *remote, size_t roff, uint64_t value)
{
    struct shm_ep *e = (struct shm_ep *)c;
    const struct shm_remote *r = remote;
    ZN_CHECK(check_ep(e, remote, "signal"));
    if (!r->ptr || roff % 8 || !inside(roff, 8, r->len))
        return zn_error(ncclInvalidArgument, ZN_SHM,
                        "shm: signal toward rank %d at offset %zu: needs an 8-byte aligned word "
                        "inside a region in shared memory",
                        e->hdr.peer, roff);
    __atomic_store_n((uint64_t *)(r->ptr + roff), value, __ATOMIC_RELEASE);
    return ncclSuccess;
}

static ncclResult_t put_signal(struct zn_conn *c, void *local, size_t loff, void *remote,
                               size_t roff, size_t len, void *sremote, size_t sroff, uint64_t value)
{
    ZN_CHECK(put(c, local, loff, remote, roff, len));
    return signal(c, sremote, sroff, value);
}

/* Stores are done when they return; the fence orders them before what the caller does next. */
static ncclResult_t flush(struct zn_conn *c)
{
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    return ncclSuccess;
}

static void dom_progress(void *dom) {}

/* A peer that exited closes nothing here: the caller's peer watch sees it. */
static ncclResult_t ep_check(struct zn_conn *c, const char *fn, int *closed)
{
    if (closed) *closed = 0;
    return ncclSuccess;
}

const struct zn_transport_rma_ops zn_shm_rma = {
    .size = sizeof(struct zn_transport_rma_ops),
    .name = "shm",
    .key_pack = key_pack,
    .key_import = key_import,
    .key_release = key_release,
    .put = put,
    .signal = signal,
    .flush = flush,
    .domain_open = dom_open,
    .domain_close = dom_close,
    .mem_alloc = mem_alloc,
    .mem_free = mem_free,
    .mem_reg = mem_reg,
    .mem_dereg = mem_dereg,
    .remote_addr = remote_addr,
    .ep_open = ep_open,
    .ep_connect = ep_connect,
    .ep_establish = ep_establish,
    .put_signal = put_signal,
    .domain_progress = dom_progress,
    .ep_check = ep_check,
    .ep_close = ep_close,
};
