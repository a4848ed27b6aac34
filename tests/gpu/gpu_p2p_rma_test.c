/*
 * gpu_p2p_rma NRANKS: the p2p transport's one-sided operations, ranks in separate processes
 * (forked here; they share GPU 0 when the machine has one). Each rank allocates one exportable
 * cuMem buffer, registers it through the transport (every peer maps it), and exchanges keys
 * over the bootstrap; then it puts its pattern into every peer's buffer at its own offset,
 * signals a word there and flushes. After a barrier every rank checks, in its own buffer,
 * every peer's bytes and signal word.
 */
#include "bootstrap/bootstrap.h"
#include "proxy/service.h"
#include "transport/gpu_peer.h"
#include "transport/peer.h"
#include "util/err.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAXR  4
#define SLOT  (256 * 1024)      /* bytes each rank puts into each peer */
#define SIGS  (MAXR * SLOT)     /* offset of the signal words */
#define BYTES (2 * 1024 * 1024) /* the buffer: slots, then the signal words */

#define FAIL(...)                                                            \
    do {                                                                     \
        fprintf(stderr, "[rank %d] FAIL %s:%d: ", rank, __FILE__, __LINE__); \
        fprintf(stderr, __VA_ARGS__);                                        \
        fprintf(stderr, " (last error: %s)\n", zn_last_error());             \
        return 1;                                                            \
    } while (0)
#define OK(call)                                                       \
    do {                                                               \
        ncclResult_t r_ = (call);                                      \
        if (r_ != ncclSuccess) FAIL("%s returned %d", #call, (int)r_); \
    } while (0)

static uint8_t byte_of(int src, int dst, size_t i)
{
    return (uint8_t)(src * 37 + dst * 11 + i * 13 + (i >> 8));
}

static uint64_t signal_of(int src, int dst)
{
    return 0x5a00000000000000ull | (uint64_t)(src + 1) << 8 | (uint64_t)(dst + 1);
}

/* What this rank put into its peers and received from them, all through the transport. */
static int exchange(const struct zn_tctx *ctx, void *state, struct zn_cumem *mem, void *handle,
                    uint8_t *host)
{
    int rank = ctx->rank, n = ctx->nranks;
    const struct zn_transport_rma_ops *rma = zn_transport_rma(&zn_transport_p2p);
    OK(zn_transport_rma_check(rma));
    struct zn_rma_key keys[MAXR];
    OK(rma->key_pack(state, handle, &keys[rank]));
    OK(zn_boot_allgather(ctx->boot, keys, sizeof(keys[0])));
    /* Peer p puts into slot p of this rank's buffer, so slot `rank` is this rank's own: its
     * bytes for each peer are staged there, put, flushed, before the next peer's. */
    for (int k = 1; k < n; k++) {
        int q = (rank + k) % n;
        for (size_t i = 0; i < SLOT; i++) host[i] = byte_of(rank, q, i);
        OK(zn_cuda_memcpy_htod((uint8_t *)mem->ptr + (size_t)rank * SLOT, host, SLOT));
        struct zn_conn *c = NULL;
        void *remote = NULL;
        OK(zn_transport_p2p.connect(state, q, ZN_CH_P2P, &c));
        OK(rma->key_import(state, q, &keys[q], &remote));
        OK(rma->put(c, handle, (size_t)rank * SLOT, remote, (size_t)rank * SLOT, SLOT));
        OK(rma->signal(c, remote, SIGS + (size_t)rank * 8, signal_of(rank, q)));
        OK(rma->flush(c));
        /* Out-of-bounds puts are refused before anything moves: this one would end half a slot
         * past the end of the peer's registered buffer. */
        if (rma->put(c, handle, 0, remote, BYTES - SLOT / 2, SLOT) != ncclInvalidArgument)
            FAIL("a put past the end of rank %d's region was not refused", q);
        zn_clear_last_error();
        OK(rma->key_release(state, remote));
    }
    return 0;
}

static int check(const struct zn_tctx *ctx, struct zn_cumem *mem, uint8_t *host)
{
    int rank = ctx->rank, n = ctx->nranks;
    void *stream = NULL;
    OK(zn_cuda_stream_create(&stream));
    OK(zn_cuda_memcpy_async(host, mem->ptr, BYTES, stream));
    OK(zn_cuda_stream_sync(stream));
    zn_cuda_stream_destroy(stream);
    for (int p = 0; p < n; p++) {
        if (p == rank) continue;
        const uint8_t *slot = host + (size_t)p * SLOT;
        for (size_t i = 0; i < SLOT; i++)
            if (slot[i] != byte_of(p, rank, i))
                FAIL("byte %zu from rank %d is %u, not %u", i, p, slot[i], byte_of(p, rank, i));
        uint64_t sig;
        memcpy(&sig, host + SIGS + (size_t)p * 8, 8);
        if (sig != signal_of(p, rank))
            FAIL("signal word of rank %d is %#llx, not %#llx", p, (unsigned long long)sig,
                 (unsigned long long)signal_of(p, rank));
    }
    return 0;
}

static int child(int rank, int n, int idfd)
{
    zn_log_rank = rank;
    /* Asked here, not before the fork: CUDA does not survive a fork. Every rank gets the same
     * answer, so all skip before the bootstrap or none does. */
    if (!zn_cuda_available()) {
        fprintf(stderr, "SKIP: no usable CUDA device\n");
        return 77;
    }
    ncclUniqueId id;
    if (read(idfd, &id, sizeof(id)) != (ssize_t)sizeof(id)) FAIL("no unique id");
    close(idfd);
    atomic_int abort_flag = 0;
    struct zn_boot *boot = NULL;
    OK(zn_boot_init(&id, rank, n, &abort_flag, &boot));
    int dev = 0;
    OK(zn_cuda_set_device(dev));
    struct zn_peer_info peers[MAXR];
    memset(peers, 0, sizeof(peers));
    OK(zn_peer_info_local(&peers[rank]));
    peers[rank].rank = rank;
    peers[rank].cuda_dev = dev;
    OK(zn_cuda_bus_id(dev, peers[rank].bus_id, sizeof(peers[rank].bus_id)));
    OK(zn_boot_allgather(boot, peers, sizeof(peers[0])));
    /* p2p serves registrations through the process's proxy service, as a communicator does. */
    OK(zn_proxy_acquire());
    struct zn_tctx ctx = { .rank = rank,
                           .nranks = n,
                           .peers = peers,
                           .boot = boot,
                           .comm_hash = zn_boot_magic(boot),
                           .abort_flag = &abort_flag,
                           .svc = zn_proxy_svc() };
    void *state = NULL, *handle = NULL;
    struct zn_cumem mem;
    uint8_t *host = malloc(BYTES);
    if (!host) FAIL("out of memory");
    OK(zn_transport_check(&zn_transport_p2p));
    OK(zn_transport_p2p.init(&ctx, &state));
    OK(zn_cumem_alloc(dev, BYTES, &mem));
    OK(zn_cuda_memset(mem.ptr, 0, BYTES));
    OK(zn_boot_barrier(boot)); /* every registration service is up */
    OK(zn_transport_p2p.reg(state, mem.ptr, BYTES, &handle));
    if (!handle) FAIL("a cuMem buffer was not registered");
    OK(zn_boot_barrier(boot)); /* every buffer is mapped by every peer */
    int rc = exchange(&ctx, state, &mem, handle, host);
    /* Every rank's puts are flushed before anyone looks. */
    if (!rc && zn_boot_barrier(boot) != ncclSuccess) rc = 1;
    if (!rc) rc = check(&ctx, &mem, host);
    if (!rc && zn_boot_barrier(boot) != ncclSuccess) rc = 1;
    if (rc) zn_boot_abort(boot, ncclInternalError, "gpu_p2p_rma failed");
    zn_transport_p2p.dereg(state, handle);
    zn_transport_p2p.fini(state);
    zn_proxy_release();
    zn_cumem_free(&mem);
    zn_boot_destroy(boot);
    free(host);
    if (!rc) fprintf(stderr, "[rank %d] ok: put, signal and flush to %d peers\n", rank, n - 1);
    return rc;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 2, rank = -1;
    if (n < 2 || n > MAXR) {
        fprintf(stderr, "usage: %s NRANKS (2-%d)\n", argv[0], MAXR);
        return 2;
    }
    /* Ranks that skip close their pipe before the id is written: no SIGPIPE for that. */
    signal(SIGPIPE, SIG_IGN);
    pid_t pids[MAXR], parent = getpid();
    int wfd[MAXR];
    for (int r = 0; r < n; r++) {
        int p[2];
        if (pipe(p) != 0) FAIL("pipe");
        pids[r] = fork();
        if (pids[r] < 0) FAIL("fork");
        if (pids[r] == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != parent) _exit(1);
            close(p[1]);
            for (int k = 0; k < r; k++) close(wfd[k]);
            exit(child(r, n, p[0]));
        }
        close(p[0]);
        wfd[r] = p[1];
    }
    ncclUniqueId id;
    ncclResult_t res = zn_boot_get_unique_id(&id);
    for (int r = 0; r < n; r++) {
        if (res == ncclSuccess && write(wfd[r], &id, sizeof(id)) != (ssize_t)sizeof(id))
            res = ncclSystemError;
        close(wfd[r]);
    }
    int failed = res != ncclSuccess, skipped = 0;
    for (int r = 0; r < n; r++) {
        int st = 0;
        waitpid(pids[r], &st, 0);
        skipped += WIFEXITED(st) && WEXITSTATUS(st) == 77;
        failed |= !WIFEXITED(st) || (WEXITSTATUS(st) != 0 && WEXITSTATUS(st) != 77);
    }
    if (skipped == n) return 77;
    failed |= skipped != 0;
    fprintf(stderr, "%s: gpu_p2p_rma, %d ranks\n", failed ? "FAIL" : "PASS", n);
    return failed;
}
