/*
 * libFuzzer target: the socket net's decoders of peer bytes (src/net/socket_wire.h): the listen
 * handle (it travels through the layer above, from another process), the hello every stream
 * opens with, and the message header.
 *
 * Every decoder gets the whole input and its exact-size prefix; the hello once with a fixed
 * magic and once with the magic the bytes carry, so that the checks after the magic are
 * reached. What is accepted must be in range and, for hello and header, encode back to the
 * same bytes.
 */
#include "net/socket_wire.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define REQUIRE(c)         \
    do {                   \
        if (!(c)) abort(); \
    } while (0)

static void handle(const uint8_t *buf, size_t len)
{
    struct zn_nsock_handle h;
    int rc = zn_nsock_handle_decode(buf, len, &h);
    REQUIRE(rc == 0 || rc == -EINVAL);
    if (rc != 0) return;
    REQUIRE(h.tag == ZN_NSOCK_HANDLE_TAG && h.version == ZN_NSOCK_VERSION);
    REQUIRE(h.nstreams < ZN_NSOCK_MAX_STREAMS);
    REQUIRE(h.addr.sa.sa_family == AF_INET || h.addr.sa.sa_family == AF_INET6);
    char s[ZN_SOCKADDR_STRLEN];
    zn_sockaddr_str(&h.addr, s, sizeof(s));
}

static void hello(const uint8_t *buf, size_t len, uint64_t magic)
{
    struct zn_nsock_hello h;
    int rc = zn_nsock_hello_decode(buf, len, magic, &h);
    REQUIRE(rc == 0 || rc == -EPROTO || rc == -EACCES || rc == -ERANGE);
    if (rc != 0) return;
    REQUIRE(len == ZN_NSOCK_HELLO_LEN && h.magic == magic);
    REQUIRE(h.nstreams < ZN_NSOCK_MAX_STREAMS && h.stream <= h.nstreams);
    uint8_t again[ZN_NSOCK_HELLO_LEN], key[ZN_NSOCK_KEY_LEN] = { 7 };
    zn_nsock_hello_encode(&h, key, again);
    REQUIRE(memcmp(again, buf, 64) == 0); /* all but the MAC, which is the key's */
    REQUIRE(zn_nsock_hello_verify(again, key));
    REQUIRE(zn_nsock_hello_verify(buf, key) == !memcmp(again + 64, buf + 64, 32));
    key[0] ^= 1;
    REQUIRE(!zn_nsock_hello_verify(again, key));
}

static void header(const uint8_t *buf, size_t len, uint64_t max)
{
    struct zn_nsock_hdr h;
    int rc = zn_nsock_hdr_decode(buf, len, max, &h);
    REQUIRE(rc == 0 || rc == -EPROTO || rc == -EMSGSIZE);
    if (rc != 0) return;
    REQUIRE(len == ZN_NSOCK_HDR_LEN && h.size <= max);
    uint8_t again[ZN_NSOCK_HDR_LEN];
    zn_nsock_hdr_encode(&h, again);
    REQUIRE(memcmp(again, buf, ZN_NSOCK_HDR_LEN) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    handle(data, size);
    if (size >= 128) handle(data, 128);
    hello(data, size, 0x1234);
    if (size >= ZN_NSOCK_HELLO_LEN) {
        uint64_t own;
        memcpy(&own, data + 8, 8);
        hello(data, ZN_NSOCK_HELLO_LEN, own);
    }
    header(data, size, UINT64_MAX);
    if (size >= ZN_NSOCK_HDR_LEN) {
        header(data, ZN_NSOCK_HDR_LEN, UINT64_MAX);
        header(data, ZN_NSOCK_HDR_LEN, 1u << 20);
    }
    return 0;
}
