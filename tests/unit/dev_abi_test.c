/* Unit tests of the host/device contract's layout arithmetic (abi/dev_abi.h), which the kernels
 * and the host code compute alike. */
#include "abi/dev_abi.h"
#include "zt.h"

#include <stdlib.h>

/* A net peer's slots, as the kernels find them (zn_dev_net_slot), are where the engine's rows put
 * them: rows inside a shadow (rows 0 and 1 after the control words), or rows of their own. */
ZT_TEST(net_slot_layout)
{
    const int nch = 3;
    const size_t slot = 64 * 1024;
    static struct zn_dev_comm c;
    c.slot_bytes = slot;
    uint8_t *shadow = (uint8_t *)0x7f0000000000ull, *own = (uint8_t *)0x7e0000000000ull;
    c.net_tx[2] = shadow + zn_dev_net_slot_off(0, 0, nch, 0, slot);
    c.net_rx[2] = shadow + zn_dev_net_slot_off(1, 0, nch, 0, slot);
    c.net_tx[5] = own;
    c.net_rx[5] = own + zn_dev_net_row_bytes(nch, slot);
    for (int ch = 0; ch < nch; ch++)
        for (uint64_t pos = 0; pos < 3 * ZN_DEV_NET_NBUF; pos++) {
            int b = (int)(pos % ZN_DEV_NET_NBUF);
            ZT_ASSERT(zn_dev_net_slot(&c, 2, 0, ch, pos) ==
                      shadow + zn_dev_net_slot_off(0, ch, nch, b, slot));
            ZT_ASSERT(zn_dev_net_slot(&c, 2, 1, ch, pos) ==
                      shadow + zn_dev_net_slot_off(1, ch, nch, b, slot));
            ZT_ASSERT(zn_dev_net_slot(&c, 5, 0, ch, pos) ==
                      own + ((size_t)ch * ZN_DEV_NET_NBUF + (size_t)b) * slot);
        }
    /* A row holds every channel's slots, and nothing of the next row. */
    ZT_EQ_INT(zn_dev_net_row_bytes(nch, slot), (long long)nch * ZN_DEV_NET_NBUF * slot);
    ZT_ASSERT(zn_dev_net_slot(&c, 5, 0, nch - 1, ZN_DEV_NET_NBUF - 1) + slot == c.net_rx[5]);
    /* A shadow is the control words and the rows it holds. */
    ZT_EQ_INT(zn_dev_net_shadow_bytes(nch, slot, 0), ZN_DEV_DATA_OFF);
    ZT_EQ_INT(zn_dev_net_shadow_bytes(nch, slot, 2),
              ZN_DEV_DATA_OFF + 2 * zn_dev_net_row_bytes(nch, slot));
}

/* The argument blocks fit the kernel parameter space (32 KB since CUDA 12.1). */
ZT_TEST(arg_sizes)
{
    ZT_ASSERT(sizeof(struct zn_dev_p2p_args) < 32000);
    ZT_ASSERT(sizeof(struct zn_dev_coll_args) < 4096);
}

/* Send/recv's LL buffers (src, ch, buf) follow the collectives' LL buffers without overlap,
 * one after another, and end where the arena does; their message counts (rows 2-4 of the
 * LLEPOCH words) stay inside that array, before the zero-copy words. */
ZT_TEST(p2p_ll_layout)
{
    const int nslots = 8, nch = 128, nbuf = 2;
    const size_t slot = 256 * 1024, ll = zn_dev_ll_off(nslots, nch, nbuf, slot);
    size_t coll_end = zn_dev_ll_buf(ll, nslots - 1, nch - 1, nch, 1) + ZN_DEV_LL_BYTES;
    size_t next = coll_end;
    for (int src = 0; src < nslots; src++)
        for (int ch = 0; ch < ZN_DEV_P2P_LL_CH; ch++)
            for (int b = 0; b < 2; b++) {
                ZT_EQ_INT(zn_dev_p2p_ll_buf(ll, nslots, nch, src, ch, b), next);
                next += ZN_DEV_P2P_LL_BYTES;
            }
    ZT_EQ_INT(next, zn_dev_arena_bytes(nslots, nch, nbuf, slot));
    size_t last = ZN_DEV_P2PLL_ACK_OFF + 8 * (ZN_DEV_MAX_RANKS * ZN_DEV_P2P_LL_CH);
    ZT_ASSERT(ZN_DEV_P2PLL_SENT_OFF >= ZN_DEV_RING_ACK_OFF + 8 * ZN_DEV_MAX_CH);
    ZT_ASSERT(last <= ZN_DEV_ZCSEQ_OFF);
    /* A message of up to 16 channels of half a buffer each is the most ZINC_GPU_P2P_LL takes. */
    ZT_EQ_INT(ZN_DEV_P2P_LL_CH * (ZN_DEV_P2P_LL_BYTES / 2), 512 * 1024);
}

/* Two blocks per channel for the split reducescatter only (device/coll.cu), one for every other
 * pattern. */
ZT_TEST(coll_blocks)
{
    static struct zn_dev_coll_args a;
    a.nch = 5;
    a.coll = ZN_COLL_REDUCESCATTER;
    a.algo = ZN_DEV_SPLIT;
    ZT_EQ_INT(zn_dev_coll_blocks(&a), 10);
    static const int others[] = { ZN_DEV_ONESHOT,   ZN_DEV_TWOSHOT,  ZN_DEV_ONESHOT_LL,
                                  ZN_DEV_ALGO_RING, ZN_DEV_ZEROCOPY, ZN_DEV_RING_LL };
    for (int i = 0; i < (int)(sizeof(others) / sizeof(others[0])); i++) {
        a.algo = others[i];
        ZT_EQ_INT(zn_dev_coll_blocks(&a), 5);
    }
}

ZT_MAIN(ZT_CASE(net_slot_layout), ZT_CASE(arg_sizes), ZT_CASE(p2p_ll_layout), ZT_CASE(coll_blocks))
