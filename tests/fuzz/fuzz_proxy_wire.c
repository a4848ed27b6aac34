/*
 * libFuzzer target: the proxy service's request decoder (src/proxy/wire.h) on arbitrary bytes,
 * read as the service reads a client's stream: a header, then the body its length announces,
 * then the next frame, until the bytes run out or a header is refused (the service closes
 * such a client). Whatever is accepted must be in bounds and must encode back to the same
 * header bytes.
 */
#include "proxy/wire.h"
#include "transport/svc.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define REQUIRE(c)         \
    do {                   \
        if (!(c)) abort(); \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t off = 0;
    while (off < size) {
        struct zn_pxw_hdr h;
        const char *why = NULL;
        int rc = zn_pxw_decode(data + off, size - off, &h, &why);
        if (rc != 0) {
            REQUIRE(rc == -EPROTO || rc == -EMSGSIZE || rc == -EBADMSG);
            REQUIRE(why != NULL && why[0] != 0);
            return 0;
        }
        REQUIRE(size - off >= ZN_PXW_HDR);
        REQUIRE(h.len >= ZN_PXW_HDR && h.len <= ZN_PXW_HDR + ZN_PXW_MAX_BODY);
        REQUIRE(h.version == ZN_PXW_VERSION && h.magic == ZN_PXW_MAGIC);
        REQUIRE(h.type > 0 && h.type < ZN_SVC_NTYPES);
        uint8_t again[ZN_PXW_HDR];
        zn_pxw_encode(&h, h.len - ZN_PXW_HDR, again);
        REQUIRE(memcmp(again, data + off, ZN_PXW_HDR) == 0);
        if (size - off < h.len) return 0; /* the service waits for the rest */
        off += h.len;
    }
    return 0;
}
