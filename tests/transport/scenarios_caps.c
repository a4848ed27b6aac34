/*
 * Scenarios of the optional capabilities, run on every transport of the registry:
 *  - onesided: a transport without one-sided operations answers put, signal and flush on a
 *    real connection with ncclInvalidUsage naming itself and the operation (and its table is
 *    the shared unsupported one);
 *  - collmem: a transport with collective memory creates it collectively; every rank writes a
 *    pattern into its own slot and reads every peer's through its own mapping.
 */
#include "conformance.h"
#include "transport/shm_arena.h"
#include "util/err.h"

#include <stdio.h>
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

int sc_onesided(struct rank_env *e)
{
    struct zn_transport_props props = { 0 };
    e->ops->query(&e->ctx, (e->rank + 1) % e->nranks, &props);
    const struct zn_transport_rma_ops *rma = zn_transport_rma(e->ops);
    CHECK(zn_transport_rma_check(rma) == ncclSuccess, "one-sided table: %s", zn_last_error());
    if (props.caps & ZN_TCAP_RMA) {
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
