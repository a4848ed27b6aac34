/*
 * Scenarios of the optional capabilities, run on every transport of the registry:
 *  - onesided: a transport with one-sided operations used on their own (shm, net) moves data
 *    through its table alone: a domain, connections to both ring neighbours, a put and a
 *    signal, then a put_signal, each checked byte for byte on the receiving rank, which sees
 *    the signal word only after the data; a transport without them answers put, signal and
 *    flush on a real connection with ncclInvalidUsage naming itself and the operation (and its
 *    table is the shared unsupported one);
 *  - collmem: a transport with collective memory creates it collectively; every rank writes a
 *    pattern into its own slot and reads every peer's through its own mapping.
 */
#include "conformance.h"
#include "transport/shm_arena.h"
#include "util/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The error says what failed and where: the transport's name and the operation. */
static int unsupported_ok(ncclResult_t r, const char *transport, const char *op)
{
    const char *msg = zn_last_error();
    CHECK(r == ncclInvalidUsage, "%s returned %d, not ncclInvalidUsage", op, (int)r);
    CHECK(strstr(msg, transport) && strstr(msg, op), "the error \"%s\" names neither %s nor %s",
          msg, transport, op);
    zn_clear_last_error();
    return 0;
}

/* One-sided through the table's second part. Each rank opens a connection to its next rank
 * ("out": it puts there) and one to its previous rank ("in": where that rank's puts land). */
#define RMA_LEN (64 * 1024 + 3)
#define RMA_TAG 0x6f730000u

/* What a rank tells its previous rank (for that rank's out connection) and its next rank (for
 * that rank's in connection). */
struct rma_info {
    struct zn_rma_key desc;     /* the connection's descriptor (ep_open's) */
    struct zn_rma_key buf, sig; /* the in side's buffer and signal word (shm: keys) */
    uint64_t len;
};

struct rma_side {
    const struct zn_transport_rma_ops *rma;
    void *dom;
    int shm; /* regions and keys (shm) or one buffer per connection (net) */
    uint8_t *src, *dst;
    uint64_t *sig, out_sig; /* sig: where prev's signals land */
    void *src_reg, *dst_reg, *sig_reg, *rdst, *rsig;
    struct zn_conn *out, *in;
    struct rma_info mine_in, mine_out, next_in, prev_out;
};

static int rma_wait_sig(struct rank_env *e, struct rma_side *x, uint64_t want)
{
    int64_t deadline = zn_now_ns() + 30ll * 1000000000ll;
    for (uint32_t polls = 1;; polls++) {
        x->rma->domain_progress(x->dom);
        if (__atomic_load_n(x->sig, __ATOMIC_ACQUIRE) >= want) return 0;
        if ((polls & 255) == 0) {
            ncclResult_t r = x->rma->ep_check(x->in, "onesided wait", NULL);
            CHECK(r == ncclSuccess, "ep_check returned %d", (int)r);
            CHECK(zn_now_ns() < deadline, "signal %llu never came (word %llu)",
                  (unsigned long long)want, (unsigned long long)*x->sig);
        }
    }
}

static int rma_setup(struct rank_env *e, struct rma_side *x)
{
    int next = (e->rank + 1) % e->nranks, prev = (e->rank + e->nranks - 1) % e->nranks;
    const struct zn_transport_rma_ops *rma = x->rma;
    CHECK(rma->domain_open(&e->ctx, &x->dom) == ncclSuccess, "domain_open");
    x->src = malloc(RMA_LEN);
    CHECK(x->src != NULL, "out of memory");
    if (x->shm) {
        /* Where peers land must be memory they map (mem_alloc); the source any memory. */
        void *p;
        CHECK(rma->mem_alloc(x->dom, RMA_LEN + 64, 2, &p, &x->dst_reg) == ncclSuccess, "mem_alloc");
        x->dst = p;
        x->sig = (uint64_t *)(void *)(((uintptr_t)x->dst + RMA_LEN + 7) & ~(uintptr_t)7);
        CHECK(rma->mem_reg(x->dom, x->src, RMA_LEN, &x->src_reg) == ncclSuccess, "mem_reg");
        CHECK(rma->key_pack(x->dom, x->dst_reg, &x->mine_in.buf) == ncclSuccess, "key_pack");
        x->mine_in.sig = x->mine_in.buf; /* the same region: offsets tell them apart */
    } else {
        x->dst = calloc(1, RMA_LEN);
        x->sig = calloc(1, sizeof(uint64_t));
        CHECK(x->dst && x->sig, "out of memory");
    }
    struct zn_rma_ep_args out = {
        .peer = next, .tag = 0, .buf = x->src, .len = RMA_LEN, .sig = &x->out_sig
    };
    struct zn_rma_ep_args in = {
        .peer = prev, .tag = 1, .buf = x->dst, .len = RMA_LEN, .sig = x->sig
    };
    CHECK(rma->ep_open(x->dom, &out, &x->out, &x->mine_out.desc) == ncclSuccess, "ep_open out");
    CHECK(rma->ep_open(x->dom, &in, &x->in, &x->mine_in.desc) == ncclSuccess, "ep_open in");
    x->mine_in.len = x->mine_out.len = RMA_LEN;
    /* My in side goes to prev (its out connection), my out side to next. */
    CHECK(zn_boot_send(e->boot, prev, RMA_TAG, &x->mine_in, sizeof(x->mine_in)) == ncclSuccess &&
              zn_boot_send(e->boot, next, RMA_TAG + 1, &x->mine_out, sizeof(x->mine_out)) ==
                  ncclSuccess &&
              zn_boot_recv(e->boot, next, RMA_TAG, &x->next_in, sizeof(x->next_in)) ==
                  ncclSuccess &&
              zn_boot_recv(e->boot, prev, RMA_TAG + 1, &x->prev_out, sizeof(x->prev_out)) ==
                  ncclSuccess,
          "descriptor exchange");
    CHECK(rma->ep_connect(x->out, &x->next_in.desc, x->next_in.len) == ncclSuccess, "ep_connect");
    CHECK(rma->ep_connect(x->in, &x->prev_out.desc, x->prev_out.len) == ncclSuccess, "ep_connect");
    if (x->shm) {
        CHECK(rma->key_import(x->dom, next, &x->next_in.buf, &x->rdst) == ncclSuccess, "import");
        CHECK(rma->key_import(x->dom, next, &x->next_in.sig, &x->rsig) == ncclSuccess, "import");
        CHECK(rma->remote_addr(x->rdst, NULL) != NULL, "a segment region is not mapped");
    }
    int64_t deadline = zn_now_ns() + 30ll * 1000000000ll;
    for (;;) {
        int a = 0, b = 0;
        CHECK(rma->ep_establish(x->out, &a) == ncclSuccess, "ep_establish out");
        CHECK(rma->ep_establish(x->in, &b) == ncclSuccess, "ep_establish in");
        if (a && b) return 0;
        CHECK(zn_now_ns() < deadline, "connections not established in 30 s");
    }
}

static void rma_teardown(struct rma_side *x)
{
    x->rma->ep_close(x->out);
    x->rma->ep_close(x->in);
    x->rma->domain_close(x->dom); /* and the regions and mappings */
    free(x->src);
    if (!x->shm) {
        free(x->dst);
        free(x->sig);
    }
}

/* Round r: a put of the whole buffer and a signal (r 1), or a put_signal of an odd range
 * (r 2); the previous rank's data is checked once its signal is seen. */
static int rma_round(struct rank_env *e, struct rma_side *x, int r)
{
    int next = (e->rank + 1) % e->nranks, prev = (e->rank + e->nranks - 1) % e->nranks;
    const struct zn_transport_rma_ops *rma = x->rma;
    size_t off = r == 1 ? 0 : 4099, len = r == 1 ? RMA_LEN : 12345;
    size_t soff = x->shm ? (size_t)((uint8_t *)x->sig - x->dst) : 0;
    pattern_fill(x->src + off, len, e->rank, next, (uint64_t)r);
    if (r == 1) {
        CHECK(rma->put(x->out, x->src_reg, off, x->rdst, off, len) == ncclSuccess, "put");
        CHECK(rma->signal(x->out, x->rsig, soff, (uint64_t)r) == ncclSuccess, "signal");
    } else {
        CHECK(rma->put_signal(x->out, x->src_reg, off, x->rdst, off, len, x->rsig, soff,
                              (uint64_t)r) == ncclSuccess,
              "put_signal");
    }
    CHECK(rma->flush(x->out) == ncclSuccess, "flush");
    if (rma_wait_sig(e, x, (uint64_t)r)) return -1;
    size_t bad = pattern_check(x->dst + off, len, prev, e->rank, (uint64_t)r);
    CHECK(bad == (size_t)-1, "round %d: byte %zu of %zu from rank %d is wrong", r, bad, len, prev);
    /* The next round's puts land where this round's were checked. */
    return barrier(e);
}

static int onesided_own(struct rank_env *e, const struct zn_transport_rma_ops *rma)
{
    struct rma_side x = { .rma = rma, .shm = rma == &zn_shm_rma };
    int rc = rma_setup(e, &x);
    if (!rc) rc = rma_round(e, &x, 1);
    if (!rc) rc = rma_round(e, &x, 2);
    rma_teardown(&x);
    return rc;
}

int sc_onesided(struct rank_env *e)
{
    struct zn_transport_props props = { 0 };
    e->ops->query(&e->ctx, (e->rank + 1) % e->nranks, &props);
    const struct zn_transport_rma_ops *rma = zn_transport_rma(e->ops);
    CHECK(zn_transport_rma_check(rma) == ncclSuccess, "one-sided table: %s", zn_last_error());
    if (props.caps & ZN_TCAP_RMA) {
        if (rma == &zn_shm_rma || rma == &zn_transport_net_rma) return onesided_own(e, rma);
        SAY("%s has one-sided operations: tested where its memory is (GPU tests)", e->ops->name);
        return barrier(e);
    }
    CHECK(rma == &zn_transport_rma_unsupported, "%s has no ZN_TCAP_RMA but its own table",
          e->ops->name);
    struct sc s;
    if (sc_init(&s, e)) return -1;
    int peer = (e->rank + 1) % e->nranks, rc = sc_connect(&s, peer, ZN_CH_COLL);
    struct zn_conn *c = s.conn[peer][ZN_CH_COLL];
    char buf[64] = { 0 };
    if (!rc) rc = unsupported_ok(rma->put(c, buf, 0, buf, 0, 8), e->ops->name, "put");
    if (!rc) rc = unsupported_ok(rma->signal(c, buf, 0, 1), e->ops->name, "signal");
    if (!rc) rc = unsupported_ok(rma->flush(c), e->ops->name, "flush");
    struct zn_rma_key key;
    void *remote = NULL;
    if (!rc) rc = unsupported_ok(rma->key_pack(s.state, buf, &key), "one-sided", "key_pack");
    memset(&key, 0, sizeof(key));
    if (!rc)
        rc = unsupported_ok(rma->key_import(s.state, peer, &key, &remote), "one-sided",
                            "key_import");
    if (!rc) rc = barrier(e);
    sc_fini(&s);
    return rc;
}

/* Byte i of rank r's slot. */
static uint8_t slot_byte(int r, size_t i)
{
    return (uint8_t)(r * 131 + i * 7 + (i >> 9));
}

int sc_collmem(struct rank_env *e)
{
    struct zn_transport_props props = { 0 };
    e->ops->query(&e->ctx, (e->rank + 1) % e->nranks, &props);
    const struct zn_transport_collmem_ops *cm = zn_transport_collmem(e->ops);
    CHECK(!cm == !(props.caps & ZN_TCAP_COLLMEM), "%s: ZN_TCAP_COLLMEM %s but the table is %s",
          e->ops->name, props.caps & ZN_TCAP_COLLMEM ? "set" : "clear", cm ? "there" : "absent");
    if (!cm) return barrier(e);
    CHECK(cm->size == sizeof(*cm) && cm->create && cm->destroy, "%s: collective memory table",
          e->ops->name);
    /* Only shm's memory is host memory that this test can read (p2p's is a GPU's). */
    if (strcmp(e->ops->name, "shm") != 0) return barrier(e);
    struct zn_collmem_args args = { .bytes = 256 * 1024, .dev = -1 };
    void *mem = NULL;
    ncclResult_t r = cm->create(&e->ctx, &args, &mem);
    CHECK(r == ncclSuccess && mem, "create returned %d", (int)r);
    struct zn_arena *a = mem;
    int rc = 0, me = e->rank;
    uint8_t *own = zn_arena_buf(a, me, 1);
    for (size_t i = 0; i < a->buf_size; i++) own[i] = slot_byte(me, i);
    zn_arena_post(a, ZN_ARENA_READY, 1, 0x1234);
    double end = now_s() + 60;
    for (int p = 0; p < e->nranks && !rc; p++) {
        int ready;
        while ((ready = zn_arena_ready(a, p, ZN_ARENA_READY, 1, 0x1234)) == 0 && now_s() < end)
            ;
        if (ready != 1) {
            rc = fail_at(__FILE__, __LINE__, "ready", "rank %d's slot: %d", p, ready);
            break;
        }
        const uint8_t *b = zn_arena_buf(a, p, 1);
        for (size_t i = 0; i < a->buf_size && !rc; i++)
            if (b[i] != slot_byte(p, i))
                rc = fail_at(__FILE__, __LINE__, "slot", "rank %d's byte %zu is %u, not %u", p, i,
                             b[i], slot_byte(p, i));
    }
    /* Nobody unmaps while a peer may still read. */
    if (!rc) rc = barrier(e);
    cm->destroy(mem);
    return rc;
}
