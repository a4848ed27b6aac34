/*
 * libFuzzer target: the bootstrap's incremental frame reader (zn_frame_reader_step,
 * src/bootstrap/wire.h) reading a non-blocking socket that receives the input in arbitrary
 * chunks, the way a stray or hostile peer can deliver it.
 *
 * Input: one byte choosing the expected type, then chunks, each a length byte L followed by up
 * to L bytes. The chunks are written one at a time into a socketpair; after each, the reader is
 * stepped until it wants more. Complete frames are checked and the reader is reset for the next
 * one, as the bootstrap does; an error ends the connection. At the end the writer shuts down and
 * the reader must report the end of the stream (never "need more" forever).
 */
#include "bootstrap/wire.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define FUZZ_MAGIC 0x7a696e632d66757aull

#define REQUIRE(c)         \
    do {                   \
        if (!(c)) abort(); \
    } while (0)

static void check_complete(const struct zn_frame_reader *r, uint32_t want)
{
    REQUIRE(r->hdr_got == sizeof(r->hdr));
    REQUIRE(zn_boot_frame_check(&r->hdr, FUZZ_MAGIC, want, 0) == 0);
    REQUIRE(r->payload != NULL && r->payload_got == r->hdr.len);
    /* Touch every payload byte: ASan catches a buffer shorter than the length. */
    volatile uint8_t sum = 0;
    for (size_t i = 0; i < r->hdr.len; i++) sum += r->payload[i];
    (void)sum;
}

/* Step until the reader needs more input. Returns 0 to go on, -1 when the connection ended. */
static int drain(struct zn_frame_reader *r, int fd, uint32_t want)
{
    for (;;) {
        int rc = zn_frame_reader_step(r, fd, FUZZ_MAGIC, want);
        if (rc == 0) return 0;
        if (rc < 0) {
            REQUIRE(rc == -EPIPE || rc == -EBADMSG || rc == -EPROTO || rc == -EMSGSIZE ||
                    rc == -ENOMEM || rc == -ECONNRESET);
            return -1;
        }
        REQUIRE(rc == 1);
        check_complete(r, want);
        zn_frame_reader_reset(r);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    uint32_t want = data[0] % 8;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return 0;
    fcntl(sv[0], F_SETFL, O_NONBLOCK);
    struct zn_frame_reader r;
    memset(&r, 0, sizeof(r));
    size_t i = 1;
    int ended = 0;
    while (i < size && !ended) {
        size_t len = data[i++];
        if (len > size - i) len = size - i;
        /* Inputs are small (-max_len): a chunk always fits in the socket buffer. */
        if (len && write(sv[1], data + i, len) != (ssize_t)len) break;
        i += len;
        ended = drain(&r, sv[0], want) < 0;
    }
    if (!ended) {
        shutdown(sv[1], SHUT_WR);
        /* Every byte is in the socket and the stream has ended: the reader must say so. */
        REQUIRE(drain(&r, sv[0], want) < 0);
    }
    zn_frame_reader_reset(&r);
    REQUIRE(r.payload == NULL && r.hdr_got == 0);
    close(sv[0]);
    close(sv[1]);
    return 0;
}
