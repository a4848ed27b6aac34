/*
 * libFuzzer target: the IB net's handshake decoder (src/net/ib_wire.c) on arbitrary bytes.
 * Whatever it accepts must be in range and encode back to the same bytes (the format has no
 * free bits: reserved bytes are zero on encode, so a non-zero reserved byte must not round-trip
 * and is only checked for the fields the decoder reads).
 */
#include "net/ib.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define REQUIRE(c)         \
    do {                   \
        if (!(c)) abort(); \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    struct zn_ib_wire w;
    const char *why = NULL;
    int rc = zn_net_ib_wire_decode(data, len, &w, &why);
    if (rc != 0) {
        REQUIRE(why != NULL && why[0] != 0);
        return 0;
    }
    REQUIRE(len >= ZN_IB_WIRE_BYTES);
    REQUIRE(w.nqps >= 1 && w.nqps <= ZN_IB_MAX_QPS);
    REQUIRE(w.link_layer == IBV_LINK_LAYER_INFINIBAND || w.link_layer == IBV_LINK_LAYER_ETHERNET);
    REQUIRE(w.mtu >= IBV_MTU_256 && w.mtu <= IBV_MTU_4096);
    uint8_t out[ZN_IB_WIRE_BYTES];
    zn_net_ib_wire_encode(&w, out);
    struct zn_ib_wire again;
    REQUIRE(zn_net_ib_wire_decode(out, sizeof(out), &again, &why) == 0);
    REQUIRE(memcmp(&again, &w, sizeof(w)) == 0);
    return 0;
}
