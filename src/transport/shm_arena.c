#include "shm_arena.h"
#include "util/clock.h"
#include "util/err.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ARENA_NBUF 2
#define HDR_BYTES  4096

struct zn_arena_hdr {
    uint32_t version;
    uint32_t nranks;
    uint32_t nbuf;
    uint32_t pad;
    uint64_t buf_size;
    atomic_int abort_code;  /* 0, or the ncclResult_t of the first failure published */
    atomic_int abort_claim; /* first writer wins the message */
    char abort_msg[512];
};
_Static_assert(sizeof(struct zn_arena_hdr) <= HDR_BYTES, "arena header fits");

static size_t layout(int nranks, size_t buf_size, size_t *ctrl_off, size_t *slot_off)
{
    *ctrl_off = HDR_BYTES;
    size_t ctrl = (size_t)nranks * ZN_ARENA_NCTR * sizeof(struct zn_arena_line);
    *slot_off = (*ctrl_off + ctrl + 4095) & ~(size_t)4095;
    return *slot_off + (size_t)nranks * ARENA_NBUF * buf_size;
}

static ncclResult_t arena_create(const struct zn_tctx *ctx, size_t slot_size, struct zn_arena **out)
{
    struct zn_arena *a = calloc(1, sizeof(*a));
    if (!a) return zn_error(ncclSystemError, ZN_SHM, "out of memory");
    a->nranks = ctx->nranks;
    a->rank = ctx->rank;
    a->nbuf = ARENA_NBUF;
    /* Each buffer is half the slot, rounded to a multiple of 4 KB (and at least 64 KB). */
    a->buf_size = (slot_size / ARENA_NBUF) & ~(size_t)4095;
    if (a->buf_size < 65536) a->buf_size = 65536;
    size_t ctrl_off, slot_off, total = layout(a->nranks, a->buf_size, &ctrl_off, &slot_off);

    char name[96];
    snprintf(name, sizeof(name), "/zn-%016llx-arena", (unsigned long long)ctx->comm_hash);
    ncclResult_t res = ncclSuccess;
    if (ctx->rank == 0) {
        res = zn_shm_create(name, total, ctx->nranks, &a->seg);
        if (res == ncclSuccess) {
            struct zn_arena_hdr *h = a->seg.base;
            h->version = ZN_ARENA_VERSION;
            h->nranks = (uint32_t)a->nranks;
            h->nbuf = (uint32_t)a->nbuf;
            h->buf_size = a->buf_size;
        }
    } else {
        int rc =
            zn_shm_attach(name, total, zn_now_ns() + zn_timeout_ns(), ctx->abort_flag, &a->seg);
        if (rc) {
            char who[128];
            zn_peer_str(ctx, 0, who, sizeof(who));
            res = zn_error(ncclRemoteError, ZN_SHM,
                           "cannot map the shared-memory arena %s created by %s: %s", name, who,
                           rc == -ETIMEDOUT ? "it did not appear within ZINC_TIMEOUT"
                           : rc == -EPROTO  ? "size or version mismatch (different zinc builds or "
                                              "ZINC_SHM_SLOT_SIZE?)"
                                            : strerror(-rc));
        }
    }
    if (res != ncclSuccess) {
        free(a);
        return res;
    }
    a->hdr = a->seg.base;
    a->ctrl = (struct zn_arena_line *)((char *)a->seg.base + ctrl_off);
    a->slots = (uint8_t *)a->seg.base + slot_off;
    zn_info(ZN_SHM, "arena %s: %d ranks, %d x %zu byte buffers per rank", name, a->nranks, a->nbuf,
            a->buf_size);
    *out = a;
    return ncclSuccess;
}

static void arena_destroy(void *mem)
{
    struct zn_arena *a = mem;
    if (!a) return;
    zn_shm_detach(&a->seg);
    free(a);
}

/* Rank 0 makes the arena, then everyone learns whether that worked before mapping it, so a
 * failure on rank 0 (a full /dev/shm) fails every rank at once instead of at the deadline. */
static ncclResult_t collmem_create(const struct zn_tctx *ctx, const struct zn_collmem_args *args,
                                   void **mem)
{
    struct zn_arena *a = NULL;
    ncclResult_t res = ncclSuccess;
    if (ctx->rank == 0) res = arena_create(ctx, args->bytes, &a);
    int *all = calloc((size_t)ctx->nranks, sizeof(int));
    if (!all) {
        arena_destroy(a);
        return zn_error(ncclSystemError, ZN_SHM, "out of memory");
    }
    all[ctx->rank] = res == ncclSuccess;
    ncclResult_t gres = zn_boot_allgather(ctx->boot, all, sizeof(int));
    int root_ok = all[0];
    free(all);
    if (res == ncclSuccess) res = gres;
    if (res == ncclSuccess && !root_ok) {
        char who[128];
        zn_peer_str(ctx, 0, who, sizeof(who));
        res = zn_error(ncclRemoteError, ZN_SHM,
                       "%s could not create the shared-memory arena (see its log)", who);
    }
    if (res == ncclSuccess && ctx->rank != 0) res = arena_create(ctx, args->bytes, &a);
    if (res != ncclSuccess) {
        arena_destroy(a);
        return res;
    }
    *mem = a;
    return ncclSuccess;
}

const struct zn_transport_collmem_ops zn_shm_collmem = {
    .size = sizeof(struct zn_transport_collmem_ops),
    .name = "shm",
    .create = collmem_create,
    .destroy = arena_destroy,
};

void zn_arena_set_abort(struct zn_arena *a, ncclResult_t code, const char *msg)
{
    if (!a || !a->hdr) return;
    int expected = 0;
    if (atomic_compare_exchange_strong(&a->hdr->abort_claim, &expected, 1)) {
        snprintf(a->hdr->abort_msg, sizeof(a->hdr->abort_msg), "%s", msg);
        atomic_store_explicit(&a->hdr->abort_code, (int)code, memory_order_release);
    }
}

int zn_arena_aborted(const struct zn_arena *a, char *msg, size_t len)
{
    int code = atomic_load_explicit(&a->hdr->abort_code, memory_order_acquire);
    if (code && msg) snprintf(msg, len, "%s", a->hdr->abort_msg);
    return code;
}
