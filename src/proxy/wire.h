/*
 * The proxy service's wire format: requests that local ranks send to a process's service
 * thread over its Unix socket, and the replies. Everything the service reads is decoded and
 * checked here before use (tests/fuzz/fuzz_proxy_wire.c fuzzes the decoder).
 *
 * Every request and every reply is one frame: a fixed header, then len - 32 bytes of body. A
 * file descriptor may ride along with the frame's first bytes (SCM_RIGHTS).
 *
 *   0        4        6        8                16       20       24       28       32
 *   +--------+--------+--------+----------------+--------+--------+--------+--------+------+
 *   | len    | version| type   | comm_hash      | dst    | src    | status | magic  | body |
 *   +--------+--------+--------+----------------+--------+--------+--------+--------+------+
 *
 * len: the whole frame, header included (32 .. 32 + ZN_PXW_MAX_BODY). type: enum zn_svc_type
 * (transport/transport.h). comm_hash, dst: the communicator and rank whose handler answers
 * (0 for the service's own types). src: the asking rank. status: 0 in requests, the
 * ncclResult_t of the handler in replies. magic: ZN_PXW_MAGIC, so that a stray writer whose
 * first bytes happen to look like a length is still caught. Integers are in host order: both
 * ends are processes of one host.
 */
#ifndef ZN_PROXY_WIRE_H
#define ZN_PROXY_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define ZN_PXW_VERSION  1
#define ZN_PXW_MAGIC    0x59585a50u /* "PZXY" */
#define ZN_PXW_HDR      32
#define ZN_PXW_MAX_BODY 1024

struct zn_pxw_hdr {
    uint32_t len;
    uint16_t version;
    uint16_t type;
    uint64_t comm_hash;
    uint32_t dst;
    uint32_t src;
    int32_t status;
    uint32_t magic;
};

_Static_assert(sizeof(struct zn_pxw_hdr) == ZN_PXW_HDR, "proxy wire header is 32 bytes");

/* Write the header of a frame with body_len bytes of body into out (ZN_PXW_HDR bytes). */
void zn_pxw_encode(const struct zn_pxw_hdr *h, uint32_t body_len, uint8_t *out);

/* Decode the first ZN_PXW_HDR bytes of a frame: 0, or -EPROTO (wrong magic or version:
 * *why says which), -EMSGSIZE (length out of bounds), -EBADMSG (type unknown). */
int zn_pxw_decode(const uint8_t *buf, size_t n, struct zn_pxw_hdr *h, const char **why);

/* The body of a HELLO reply: who answers. */
struct zn_pxw_hello {
    uint32_t version; /* ZN_PXW_VERSION */
    int32_t pid;
    uint32_t nclients;
    uint32_t pad;
};

#endif
