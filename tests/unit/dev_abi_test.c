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

ZT_MAIN(ZT_CASE(net_slot_layout), ZT_CASE(arg_sizes))
