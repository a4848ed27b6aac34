/*
 * The transport contract's tables without a GPU: every table (the message transports, p2p,
 * the one-sided and collective-memory tables) passes its check; a table of another size or
 * with an empty slot is refused with an error naming what is wrong; the lookups hand out the
 * unsupported one-sided table to transports without one; and the registration table finds
 * exactly the ranges registered.
 */
#include "proxy/service.h"
#include "transport/gpu_peer.h"
#include "transport/reg.h"
#include "transport/shm_arena.h"
#include "transport/transport.h"
#include "util/err.h"
#include "zt.h"

#include <stdlib.h>
#include <unistd.h>

ZT_TEST(every_table_passes_its_check)
{
    for (int i = 0; i < ZN_NTRANSPORTS; i++) ZT_EQ_INT(zn_transport_check(zn_transports[i]), 0);
    ZT_EQ_INT(zn_transport_check(&zn_transport_p2p), 0);
    ZT_EQ_INT(zn_transport_rma_check(&zn_p2p_rma), 0);
    ZT_EQ_INT(zn_transport_rma_check(&zn_shm_rma), 0);
    ZT_EQ_INT(zn_transport_rma_check(&zn_transport_net_rma), 0);
    ZT_EQ_INT(zn_transport_rma_check(&zn_transport_rma_unsupported), 0);
    ZT_EQ_INT(zn_shm_collmem.size, sizeof(struct zn_transport_collmem_ops));
    ZT_EQ_INT(zn_p2p_collmem.size, sizeof(struct zn_transport_collmem_ops));
}

ZT_TEST(checks_refuse_short_and_holed_tables)
{
    struct zn_transport_rma_ops t = zn_p2p_rma;
    t.size -= sizeof(void *);
    ZT_EQ_INT(zn_transport_rma_check(&t), ncclInternalError);
    ZT_ASSERT(strstr(zn_last_error(), "one-sided table of"));
    t = zn_p2p_rma;
    t.flush = NULL;
    ZT_EQ_INT(zn_transport_rma_check(&t), ncclInternalError);
    ZT_ASSERT(strstr(zn_last_error(), "flush"));
    /* The second version's slots are checked too. */
    t = zn_shm_rma;
    t.ep_close = NULL;
    ZT_EQ_INT(zn_transport_rma_check(&t), ncclInternalError);
    ZT_ASSERT(strstr(zn_last_error(), "ep_close"));
    struct zn_transport_ops o = zn_transport_p2p;
    o.dereg = NULL;
    ZT_EQ_INT(zn_transport_check(&o), ncclInternalError);
    ZT_ASSERT(strstr(zn_last_error(), "dereg"));
    zn_clear_last_error();
}

ZT_TEST(lookups_match_capabilities)
{
    struct zn_peer_info peers[2] = { { .rank = 0, .cuda_dev = -1 }, { .rank = 1, .cuda_dev = -1 } };
    struct zn_tctx ctx = { .rank = 0, .nranks = 2, .peers = peers };
    const struct zn_transport_ops *all[] = { &zn_transport_shm, &zn_transport_net,
                                             &zn_transport_p2p };
    for (int i = 0; i < 3; i++) {
        struct zn_transport_props props = { 0 };
        all[i]->query(&ctx, 1, &props);
        const struct zn_transport_rma_ops *rma = zn_transport_rma(all[i]);
        ZT_ASSERT(rma != NULL);
        ZT_EQ_INT(rma != &zn_transport_rma_unsupported, !!(props.caps & ZN_TCAP_RMA));
        ZT_EQ_INT(zn_transport_collmem(all[i]) != NULL, !!(props.caps & ZN_TCAP_COLLMEM));
    }
    ZT_ASSERT(zn_transport_rma(&zn_transport_p2p) == &zn_p2p_rma);
    ZT_ASSERT(zn_transport_rma(&zn_transport_shm) == &zn_shm_rma);
    ZT_ASSERT(zn_transport_rma(&zn_transport_net) == &zn_transport_net_rma);
    ZT_ASSERT(zn_transport_collmem(&zn_transport_shm) == &zn_shm_collmem);
    ZT_ASSERT(zn_transport_collmem(&zn_transport_p2p) == &zn_p2p_collmem);
    /* p2p carries no messages: it never claims a pair of host ranks. */
    ZT_EQ_INT(zn_transport_p2p.can_connect(&ctx, 1), 0);
}

/* A p2p key is opaque to the peer, but carries where the importing rank maps the region; a
 * key of another size, or one naming another owner, is refused. */
ZT_TEST(p2p_keys_round_trip_checks)
{
    struct zn_reg_entry e = { .lo = 0x10100, .hi = 0x10500, .base = 0x10000, .id = 5 };
    e.peer[0] = (void *)0x10000;
    e.peer[1] = (void *)0x90000;
    struct zn_peer_info peers[2] = { { .rank = 0, .cuda_dev = -1 }, { .rank = 1, .cuda_dev = -1 } };
    /* States of ranks 0 and 1 as one process can make them without a GPU (init starts only
     * the registration service). */
    /* GPU 0 by the peer info; without CUDA the service thread just finds no device. */
    peers[0].cuda_dev = peers[1].cuda_dev = 0;
    void *none = NULL;
    struct zn_peer_info hostonly[2] = { { .rank = 0, .cuda_dev = -1 }, { .rank = 1 } };
    struct zn_tctx ch = { .rank = 0, .nranks = 2, .peers = hostonly };
    ZT_EQ_INT(zn_transport_p2p.init(&ch, &none), ncclInvalidUsage);
    ZT_ASSERT(strstr(zn_last_error(), "no GPU"));
    /* p2p serves registrations through the process's proxy service, as a communicator does. */
    ZT_EQ_INT(zn_proxy_acquire(), ncclSuccess);
    struct zn_tctx c0 = { .rank = 0,
                          .nranks = 2,
                          .peers = peers,
                          .comm_hash = 0x7a6e000000000000ull ^ (uint64_t)getpid(),
                          .svc = zn_proxy_svc() };
    struct zn_tctx c1 = c0;
    c1.rank = 1;
    void *owner = NULL, *importer = NULL;
    ZT_EQ_INT(zn_transport_p2p.init(&c0, &owner), 0);
    ZT_EQ_INT(zn_transport_p2p.init(&c1, &importer), 0);
    struct zn_rma_key key;
    ZT_EQ_INT(zn_p2p_rma.key_pack(owner, &e, &key), 0);
    ZT_ASSERT(key.size > 0 && key.size <= ZN_RMA_KEY_MAX);
    void *remote = NULL;
    /* The key says rank 0 owns the region: a claim that rank 1 sent it is refused. */
    ZT_EQ_INT(zn_p2p_rma.key_import(importer, 1, &key, &remote), ncclInvalidArgument);
    ZT_ASSERT(remote == NULL);
    struct zn_rma_key bad = key;
    bad.size = 3;
    ZT_EQ_INT(zn_p2p_rma.key_import(importer, 0, &bad, &remote), ncclInvalidArgument);
    ZT_ASSERT(strstr(zn_last_error(), "not a p2p key"));
    ZT_EQ_INT(zn_p2p_rma.key_import(importer, 0, &key, &remote), 0);
    ZT_ASSERT(remote != NULL);
    ZT_EQ_INT(zn_p2p_rma.key_release(importer, remote), 0);
    zn_transport_p2p.fini(owner);
    zn_transport_p2p.fini(importer);
    zn_proxy_release();
    zn_clear_last_error();
}

ZT_TEST(reg_table_finds_registered_ranges)
{
    struct zn_reg_table t = { 0 };
    struct zn_reg_entry *a = NULL, *b = NULL, *c = NULL;
    struct zn_reg_entry ra = { .lo = 1000, .hi = 2000, .base = 1000 };
    struct zn_reg_entry rb = { .lo = 5000, .hi = 5100, .base = 4096 };
    ZT_EQ_INT(zn_reg_add(&t, &ra, &a), 0);
    ZT_EQ_INT(zn_reg_add(&t, &rb, &b), 0);
    ZT_ASSERT(a->id != 0 && b->id != 0 && a->id != b->id);
    ZT_ASSERT(zn_reg_find(&t, (void *)1000, 1000) == a);
    ZT_ASSERT(zn_reg_find(&t, (void *)1500, 500) == a);
    ZT_ASSERT(zn_reg_find(&t, (void *)1500, 501) == NULL); /* one byte past the end */
    ZT_ASSERT(zn_reg_find(&t, (void *)999, 2) == NULL);
    ZT_ASSERT(zn_reg_find(&t, (void *)5050, 50) == b);
    ZT_ASSERT(zn_reg_find(&t, (void *)5050, SIZE_MAX) == NULL); /* wraps around */
    ZT_ASSERT(zn_reg_find(NULL, (void *)1000, 1) == NULL);
    uint32_t ida = a->id;
    zn_reg_remove(&t, ida);
    ZT_ASSERT(zn_reg_find(&t, (void *)1000, 1) == NULL);
    ZT_ASSERT(zn_reg_find(&t, (void *)5000, 100) == b);
    /* Ids are never reused: peers name registrations by them. */
    ZT_EQ_INT(zn_reg_add(&t, &ra, &c), 0);
    ZT_ASSERT(c->id != ida && c->id != b->id);
    zn_reg_remove(&t, 12345); /* not there: nothing happens */
    ZT_EQ_INT(t.n, 2);
    zn_reg_fini(&t);
    ZT_EQ_INT(t.n, 0);
}

ZT_MAIN(ZT_CASE(every_table_passes_its_check), ZT_CASE(checks_refuse_short_and_holed_tables),
        ZT_CASE(lookups_match_capabilities), ZT_CASE(p2p_keys_round_trip_checks),
        ZT_CASE(reg_table_finds_registered_ranges))
