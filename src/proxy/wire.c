#include "wire.h"
#include "transport/svc.h"

#include <errno.h>
#include <string.h>

void zn_pxw_encode(const struct zn_pxw_hdr *h, uint32_t body_len, uint8_t *out)
{
    struct zn_pxw_hdr w = *h;
    w.len = ZN_PXW_HDR + body_len;
    w.version = ZN_PXW_VERSION;
    w.magic = ZN_PXW_MAGIC;
    memcpy(out, &w, sizeof(w));
}

int zn_pxw_decode(const uint8_t *buf, size_t n, struct zn_pxw_hdr *h, const char **why)
{
    struct zn_pxw_hdr w;
    if (n < ZN_PXW_HDR) {
        *why = "short header";
        return -EPROTO;
    }
    memcpy(&w, buf, sizeof(w));
    if (w.magic != ZN_PXW_MAGIC) {
        *why = "not a zinc proxy request (bad magic)";
        return -EPROTO;
    }
    if (w.version != ZN_PXW_VERSION) {
        *why = "protocol version differs (another zinc build?)";
        return -EPROTO;
    }
    if (w.len < ZN_PXW_HDR || w.len > ZN_PXW_HDR + ZN_PXW_MAX_BODY) {
        *why = "frame length out of bounds";
        return -EMSGSIZE;
    }
    if (w.type == 0 || w.type >= ZN_SVC_NTYPES) {
        *why = "unknown request type";
        return -EBADMSG;
    }
    *h = w;
    return 0;
}
