/*
 * MSCCL++ connections on host memory across processes (mscclppTransportSHM, or
 * mscclppTransportIB over zinc's nets; zincConn*), the programs MSCCL++ 0.1 shipped as kernels
 * written for host threads: an allgather made only of put / signal / wait, a ring allreduce on
 * putWithSignal and a ping-pong, each checked exactly against a reference; and bad usage.
 * Written in C, to show what a C caller gets.
 *
 *   msc_shm_check allgather|allreduce|pingpong|errors|dead|dumpwait [shm | net HOSTS]
 *                                                                 (under zinc-run)
 *   msc_shm_check allgather|allreduce|pingpong malloc|mixed
 *   msc_shm_check cmarefused
 *   msc_shm_check bounds|onesided|deadwrite|misuse net HOSTS
 *
 * malloc: SHM connection buffers come from calloc on every rank, so puts go by cross-memory
 * attach; mixed: from calloc on odd ranks and zincConnMemAlloc on even ones, so every kind of
 * pair (plain stores into a segment from a malloc'd source, process_vm_writev from a segment)
 * is exercised. cmarefused: a seccomp filter makes the kernel refuse process_vm_readv/writev
 * (as a container's profile may), and setup over malloc'd buffers must fail saying why, on
 * stderr even though the program replaced the log handler.
 *
 * net: the connections are mscclppTransportIB over the net zinc picks (ZINC_NET), libmscclpp's
 * proxy runs, and the ranks are split over HOSTS "hosts" (ZINC_HOSTID = rank % HOSTS). With
 * MSC_EXPECT_PATH=rdma (or twosided) and ZINC_DEBUG=INFO, every setup round also checks that
 * each new connection logged the path its puts take ("puts as RDMA writes" / "puts as
 * two-sided messages").
 */
#include "bootstrap/launcher.h"
#include "mscclpp.h"
#include "zinc.h"

#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int rank, nranks;
static long failures;
static mscclppTransport_t transport = mscclppTransportSHM;

#include "msc_check.h"

/* Where connection buffers come from: 0 zincConnMemAlloc, 1 calloc, 2 calloc on odd ranks. */
static int mem_mode;
static void *plain_bufs[64];
static int nplain;

/* A zeroed connection buffer of size bytes, from where mem_mode says. */
static void conn_alloc(mscclppComm_t comm, size_t size, void **ptr)
{
    if (mem_mode == 0 || (mem_mode == 2 && rank % 2 == 0)) {
        MSCCLPPCHECK(zincConnMemAlloc(comm, size, ptr));
        return;
    }
    if (nplain == 64 || !(*ptr = calloc(1, size))) {
        fprintf(stderr, "[%d] out of plain buffers\n", rank);
        exit(1);
    }
    plain_bufs[nplain++] = *ptr;
}

/* The value rank r contributes at element i of iteration it: distinct per (r, i, it). */
static uint64_t val(int r, size_t i, int it)
{
    return ((uint64_t)r * 1000003 + (uint64_t)i * 7 + (uint64_t)it * 100000007) *
           0x9e3779b97f4a7c15ull;
}

static mscclppComm_t init(void)
{
    const char *root = getenv("ZINC_COMM_ID");
    if (!root) {
        fprintf(stderr, "ZINC_COMM_ID is not set: run under zinc-run\n");
        exit(2);
    }
    mscclppComm_t comm;
    MSCCLPPCHECK(mscclppCommInitRank(&comm, nranks, root, rank));
    int r, n;
    MSCCLPPCHECK(mscclppCommRank(comm, &r));
    MSCCLPPCHECK(mscclppCommSize(comm, &n));
    EXPECT(r == rank && n == nranks, "rank/size %d/%d, expected %d/%d", r, n, rank, nranks);
    return comm;
}

/* The log: lines kept in logged[] while a test captures them (else passed on to stderr), and
 * the connections' path lines counted throughout. */
static char logged[8192];
static int capturing;
static long path_lines[2]; /* "puts as RDMA writes", "puts as two-sided messages" */
static void capture(const char *msg)
{
    path_lines[0] += strstr(msg, "puts as RDMA writes") != NULL;
    path_lines[1] += strstr(msg, "puts as two-sided messages") != NULL;
    if (!capturing) {
        fputs(msg, stderr);
        return;
    }
    size_t have = strlen(logged);
    snprintf(logged + have, sizeof(logged) - have, "%s", msg);
}

static void capture_start(void)
{
    MSCCLPPCHECK(mscclppSetLogHandler(capture));
    capturing = 1;
    logged[0] = 0;
}

/* MSC_EXPECT_PATH: every connection of a setup round logged that its puts take this path. */
static const char *expect_path;
static void check_path(mscclppComm_t comm, int before)
{
    mscclppDevConn_t *all;
    int n;
    MSCCLPPCHECK(mscclppGetAllDeviceConnections(comm, &all, &n));
    static long seen[2];
    int want = strcmp(expect_path, "rdma") == 0 ? 0 : 1;
    EXPECT(path_lines[want] - seen[want] == n - before && path_lines[!want] == seen[!want],
           "%d connection(s) set up, %ld logged puts as %s, %ld the other path", n - before,
           path_lines[want] - seen[want], expect_path, path_lines[!want] - seen[!want]);
    seen[0] = path_lines[0];
    seen[1] = path_lines[1];
}

/* mscclppConnectionSetup; over the net, libmscclpp's proxy then moves the transfers on (it is
 * stopped around each setup round: a launch covers the connections set up before it). */
static int proxy_up;
static void setup(mscclppComm_t comm)
{
    if (proxy_up) MSCCLPPCHECK(mscclppProxyStop(comm));
    proxy_up = 0;
    mscclppDevConn_t *all;
    int before;
    MSCCLPPCHECK(mscclppGetAllDeviceConnections(comm, &all, &before));
    MSCCLPPCHECK(mscclppConnectionSetup(comm));
    if (expect_path) check_path(comm, before);
    if (transport == mscclppTransportIB) {
        MSCCLPPCHECK(mscclppProxyLaunch(comm));
        proxy_up = 1;
    }
}

static void destroy(mscclppComm_t comm)
{
    if (proxy_up) MSCCLPPCHECK(mscclppProxyStop(comm));
    proxy_up = 0;
    MSCCLPPCHECK(mscclppCommDestroy(comm));
}

/* Every rank puts its slice into every peer's buffer, signals, then waits for every peer. */
static void allgather(mscclppComm_t comm)
{
    const size_t counts[] = { 1, 3, 1000, 65537 };
    for (int t = 0; t < 4; t++) {
        size_t count = counts[t], bytes = count * sizeof(uint64_t);
        uint64_t *buf;
        conn_alloc(comm, bytes * (size_t)nranks, (void **)&buf);
        for (int p = 0; p < nranks; p++)
            if (p != rank)
                MSCCLPPCHECK(
                    mscclppConnect(comm, p, t, buf, bytes * (size_t)nranks, transport, NULL));
        setup(comm);
        for (int it = 0; it < 3; it++) {
            for (size_t i = 0; i < count; i++) buf[(size_t)rank * count + i] = val(rank, i, it);
            for (int p = 0; p < nranks; p++) {
                if (p == rank) continue;
                mscclppDevConn_t *c;
                MSCCLPPCHECK(mscclppGetDeviceConnection(comm, p, t, &c));
                MSCCLPPCHECK(zincConnPut(c, (uint64_t)rank * bytes, (uint64_t)rank * bytes, bytes));
                MSCCLPPCHECK(zincConnSignal(c));
            }
            for (int p = 0; p < nranks; p++) {
                if (p == rank) continue;
                mscclppDevConn_t *c;
                MSCCLPPCHECK(mscclppGetDeviceConnection(comm, p, t, &c));
                MSCCLPPCHECK(zincConnWait(c));
            }
            long bad = 0;
            for (int p = 0; p < nranks; p++)
                for (size_t i = 0; i < count; i++)
                    bad += buf[(size_t)p * count + i] != val(p, i, it);
            EXPECT(bad == 0, "allgather of %zu elements, iteration %d: %ld wrong", count, it, bad);
            /* Peers overwrite the buffer in the next iteration: everyone has checked first. */
            MSCCLPPCHECK(mscclppBootstrapBarrier(comm));
        }
    }
}

/* Ring allreduce (sum of uint64, wrapping): reduce-scatter into a scratch area with putWithSignal,
 * then an allgather along the ring. With two ranks next and prev are one connection. */
static void allreduce(mscclppComm_t comm)
{
    const size_t chunk = 4099; /* elements per rank: odd, not a multiple of anything */
    size_t n = (size_t)nranks, count = chunk * n, cb = chunk * sizeof(uint64_t);
    uint64_t *buf; /* data (count elements), then n - 1 scratch chunks */
    size_t bytes = (count + chunk * (n - 1)) * sizeof(uint64_t);
    conn_alloc(comm, bytes, (void **)&buf);
    int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
    if (nranks > 1) {
        MSCCLPPCHECK(mscclppConnect(comm, next, 0, buf, bytes, transport, NULL));
        if (prev != next) MSCCLPPCHECK(mscclppConnect(comm, prev, 0, buf, bytes, transport, NULL));
    }
    setup(comm);
    mscclppDevConn_t *to = NULL, *from = NULL;
    if (nranks > 1) {
        MSCCLPPCHECK(mscclppGetDeviceConnection(comm, next, 0, &to));
        MSCCLPPCHECK(mscclppGetDeviceConnection(comm, prev, 0, &from));
    }
    uint64_t *scratch = buf + count;
    for (int it = 0; it < 3; it++) {
        for (size_t i = 0; i < count; i++) buf[i] = val(rank, i, it);
        for (int s = 0; s < nranks - 1; s++) {
            size_t send = (size_t)(rank - s + nranks) % n,
                   recv = (size_t)(rank - s - 1 + 2 * nranks) % n;
            MSCCLPPCHECK(zincConnPutWithSignal(to, (count + (size_t)s * chunk) * sizeof(uint64_t),
                                               send * cb, cb));
            MSCCLPPCHECK(zincConnWait(from));
            for (size_t i = 0; i < chunk; i++)
                buf[recv * chunk + i] += scratch[(size_t)s * chunk + i];
        }
        for (int s = 0; s < nranks - 1; s++) {
            size_t send = (size_t)(rank + 1 - s + nranks) % n;
            MSCCLPPCHECK(zincConnPutWithSignal(to, send * cb, send * cb, cb));
            MSCCLPPCHECK(zincConnWait(from));
        }
        if (to) MSCCLPPCHECK(zincConnFlush(to));
        long bad = 0;
        for (size_t i = 0; i < count; i++) {
            uint64_t want = 0;
            for (int r = 0; r < nranks; r++) want += val(r, i, it);
            bad += buf[i] != want;
        }
        EXPECT(bad == 0, "ring allreduce iteration %d: %ld of %zu elements wrong", it, bad, count);
        MSCCLPPCHECK(mscclppBootstrapBarrier(comm));
    }
}

/* Rank 0 sends, rank 1 adds one to every byte and sends it back, for several sizes. */
static void pingpong(mscclppComm_t comm)
{
    const size_t max = 1 << 20;
    uint8_t *buf;
    conn_alloc(comm, max, (void **)&buf);
    int peer = rank == 0 ? 1 : 0;
    if (rank < 2) MSCCLPPCHECK(mscclppConnect(comm, peer, 5, buf, max, transport, NULL));
    setup(comm);
    if (rank < 2) {
        mscclppDevConn_t *c;
        MSCCLPPCHECK(mscclppGetDeviceConnection(comm, peer, 5, &c));
        const size_t sizes[] = { 0, 1, 7, 4096, 65535, max };
        for (int t = 0; t < 6; t++) {
            size_t n = sizes[t];
            for (int round = 0; round < 4; round++) {
                if (rank == 0) {
                    for (size_t i = 0; i < n; i++) buf[i] = (uint8_t)(i * 31 + round + t);
                    MSCCLPPCHECK(zincConnPutWithSignal(c, 0, 0, n));
                    MSCCLPPCHECK(zincConnWait(c));
                    long bad = 0;
                    for (size_t i = 0; i < n; i++)
                        bad += buf[i] != (uint8_t)(i * 31 + round + t + 1);
                    EXPECT(bad == 0, "ping-pong of %zu bytes, round %d: %ld wrong", n, round, bad);
                } else {
                    MSCCLPPCHECK(zincConnWait(c));
                    for (size_t i = 0; i < n; i++) buf[i] = (uint8_t)(buf[i] + 1);
                    MSCCLPPCHECK(zincConnPutWithSignal(c, 0, 0, n));
                }
            }
        }
    }
    MSCCLPPCHECK(mscclppBootstrapBarrier(comm));
}

/* Bad usage: each is refused with the documented code and a message naming the cause. */
static void errors(mscclppComm_t comm)
{
    capture_start();
    /* Any host memory will do, but all of it must be mapped: the second page is not. */
    long page = sysconf(_SC_PAGESIZE);
    char *plain =
        mmap(NULL, (size_t)page * 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT(plain != MAP_FAILED && munmap(plain + page, (size_t)page) == 0, "mmap: %s",
           strerror(errno));
    EXPECT(mscclppConnect(comm, (rank + 1) % nranks, 1, plain, (uint64_t)page * 2,
                          mscclppTransportSHM, NULL) == mscclppInvalidArgument,
           "SHM connection over a range with an unmapped page accepted");
    EXPECT(strstr(logged, "not host memory"), "message does not say why: %s", logged);
    munmap(plain, (size_t)page);
    uint8_t *buf;
    MSCCLPPCHECK(zincConnMemAlloc(comm, 4096, (void **)&buf));
    logged[0] = 0;
    EXPECT(mscclppConnect(comm, (rank + 1) % nranks, 1, buf, 4096, mscclppTransportIB,
                          "zn_no_such_dev") == mscclppInvalidUsage,
           "IB on a device that does not exist accepted");
    EXPECT(strstr(logged, "zn_no_such_dev"), "message does not name the device: %s", logged);
    EXPECT(mscclppConnect(comm, rank, 1, buf, 4096, mscclppTransportSHM, NULL) ==
               mscclppInvalidArgument,
           "a connection to itself accepted");
    EXPECT(mscclppConnect(comm, (rank + 1) % nranks, 1, buf, 8192, mscclppTransportSHM, NULL) ==
               mscclppInvalidArgument,
           "a buffer running past its zincConnMemAlloc allocation accepted");

    /* A declaration with no counterpart: rank 0 declares tag 9 to rank 1, which does not.
     * Both fail, naming the tag; the others succeed. */
    logged[0] = 0;
    if (rank == 0) MSCCLPPCHECK(mscclppConnect(comm, 1, 9, buf, 4096, mscclppTransportSHM, NULL));
    mscclppResult_t r = mscclppConnectionSetup(comm);
    if (rank < 2) {
        EXPECT(r == mscclppInvalidUsage, "setup without counterpart returned %d", (int)r);
        EXPECT(strstr(logged, "tag 9") && strstr(logged, "declared none"),
               "message does not name the tag: %s", logged);
    } else {
        EXPECT(r == mscclppSuccess, "setup of ranks without connections failed: %d", (int)r);
    }
    MSCCLPPCHECK(mscclppBootstrapBarrier(comm));

    /* A rank that cannot prepare its side (a connection without its buffer) fails the setup at
     * once on every rank, the others naming it, instead of leaving them to the deadline. */
    logged[0] = 0;
    if (rank == 0)
        MSCCLPPCHECK(mscclppConnectWithoutBuffer(comm, 1, 11, mscclppTransportSHM, NULL));
    if (rank == 1) MSCCLPPCHECK(mscclppConnect(comm, 0, 11, buf, 4096, mscclppTransportSHM, NULL));
    r = mscclppConnectionSetup(comm);
    if (rank == 0) {
        EXPECT(r == mscclppInvalidUsage, "setup with a connection without buffer returned %d",
               (int)r);
        EXPECT(strstr(logged, "tag 11 has no buffer"), "message: %s", logged);
    } else {
        EXPECT(r == mscclppRemoteError, "setup beside a failed rank returned %d", (int)r);
        EXPECT(strstr(logged, "rank 0 failed to prepare"), "message: %s", logged);
    }
    MSCCLPPCHECK(mscclppBootstrapBarrier(comm));
    MSCCLPPCHECK(mscclppCommDestroy(comm));

    /* A fresh communicator: out-of-bounds puts are refused and move nothing; a wait with no
     * signal gives up at the deadline. */
    comm = init();
    MSCCLPPCHECK(zincConnMemAlloc(comm, 4096, (void **)&buf));
    int peer = rank ^ 1;
    if (peer < nranks)
        MSCCLPPCHECK(
            mscclppConnect(comm, peer, 2, buf, rank == 0 ? 4096 : 1024, mscclppTransportSHM, NULL));
    MSCCLPPCHECK(mscclppConnectionSetup(comm));
    if (rank == 0 && peer < nranks) {
        mscclppDevConn_t *c;
        MSCCLPPCHECK(mscclppGetDeviceConnection(comm, peer, 2, &c));
        logged[0] = 0;
        memset(buf, 0x5a, 4096);
        EXPECT(zincConnPut(c, 1000, 0, 25) == (int)mscclppInvalidArgument,
               "put past the end of the peer's 1024-byte buffer accepted");
        EXPECT(strstr(logged, "outside the peer's buffer of 1024 bytes"), "message: %s", logged);
        EXPECT(zincConnPut(c, 0, 4090, 7) == (int)mscclppInvalidArgument,
               "put from past the end of the local buffer accepted");
        EXPECT(zincConnPut(c, 1000, 0, 24) == 0, "put ending at the peer's last byte refused");
        MSCCLPPCHECK(mscclppSetBootstrapConnTimeout(1));
        EXPECT(zincConnWait(c) == (int)mscclppSystemError, "wait with no signal did not time out");
        MSCCLPPCHECK(mscclppSetBootstrapConnTimeout(60));
    }
    MSCCLPPCHECK(mscclppBootstrapBarrier(comm));
    if (rank == 1) {
        long bad = 0;
        for (int i = 0; i < 1024; i++) bad += buf[i] != (i >= 1000 ? 0x5a : 0);
        EXPECT(bad == 0, "the refused puts changed %ld bytes", bad);
    }
    MSCCLPPCHECK(mscclppBootstrapBarrier(comm));
    MSCCLPPCHECK(mscclppCommDestroy(comm));
    MSCCLPPCHECK(mscclppSetLogHandler(mscclppDefaultLogHandler));
    exit(failures ? 1 : 0);
}

/* Over the net: out-of-bounds puts are refused and move nothing; the one ending at the
 * peer's last byte lands. */
static void bounds(mscclppComm_t comm)
{
    uint8_t *buf = calloc(1, 4096);
    if (!buf) exit(2);
    int peer = rank ^ 1;
    if (peer < nranks)
        MSCCLPPCHECK(mscclppConnect(comm, peer, 2, buf, rank == 0 ? 4096 : 1024, transport, NULL));
    setup(comm);
    if (rank == 0 && peer < nranks) {
        mscclppDevConn_t *c;
        MSCCLPPCHECK(mscclppGetDeviceConnection(comm, peer, 2, &c));
        memset(buf, 0x5a, 4096);
        capture_start();
        EXPECT(zincConnPut(c, 1000, 0, 25) == (int)mscclppInvalidArgument,
               "put past the end of the peer's 1024-byte buffer accepted");
        EXPECT(strstr(logged, "outside the peer's buffer of 1024 bytes"), "message: %s", logged);
        EXPECT(zincConnPutWithSignal(c, 1024, 0, 1) == (int)mscclppInvalidArgument,
               "put with signal past the end accepted");
        EXPECT(zincConnPut(c, 0, 4090, 7) == (int)mscclppInvalidArgument,
               "put from past the end of the local buffer accepted");
        EXPECT(zincConnPutWithSignal(c, 1000, 0, 24) == 0, "put ending at the last byte refused");
        MSCCLPPCHECK(zincConnFlush(c));
    }
    if (rank == 1) {
        mscclppDevConn_t *c;
        MSCCLPPCHECK(mscclppGetDeviceConnection(comm, peer, 2, &c));
        MSCCLPPCHECK(zincConnWait(c));
        long bad = 0;
        for (int i = 0; i < 1024; i++) bad += buf[i] != (i >= 1000 ? 0x5a : 0);
        EXPECT(bad == 0, "the refused puts changed %ld bytes", bad);
    }
    destroy(comm);
    free(buf);
    MSCCLPPCHECK(mscclppSetLogHandler(mscclppDefaultLogHandler));
    exit(failures ? 1 : 0);
}

/* API misuse (net: the IB transport): sizes that overflow, buffer sizes larger than the
 * buffer, a destroyed communicator used and destroyed again -- each refused with
 * mscclppInvalidArgument and a message, never a crash or a read of freed memory. */
static void misuse(mscclppComm_t comm)
{
    capture_start();
    void *p = NULL;
    const size_t huge[] = { SIZE_MAX, SIZE_MAX - 4096, (size_t)INT64_MAX };
    for (int i = 0; i < 3; i++) {
        logged[0] = 0;
        EXPECT(zincConnMemAlloc(comm, huge[i], &p) == (int)mscclppInvalidArgument && !p,
               "zincConnMemAlloc of %zu bytes was not refused", huge[i]);
        EXPECT(strstr(logged, "too large"), "message: %s", logged);
    }
    uint8_t *shm;
    MSCCLPPCHECK(zincConnMemAlloc(comm, 4096, (void **)&shm));
    EXPECT(shm[0] == 0 && shm[4095] == 0, "a zincConnMemAlloc buffer is not zeroed");

    /* A 64 KB host buffer declared with sizes past its end, on the IB transport. */
    size_t len = 65536;
    uint8_t *buf = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED) exit(2);
    /* (Just past the end may be another mapping: sizes that reach unmapped addresses.) */
    const uint64_t sizes[] = { UINT64_MAX, 1ull << 40, 1ull << 46 };
    for (int i = 0; i < 3; i++) {
        logged[0] = 0;
        EXPECT(mscclppConnect(comm, rank ^ 1, 1, buf, sizes[i], transport, NULL) ==
                   mscclppInvalidArgument,
               "a %llu-byte buffer size for a 64 KB buffer was accepted",
               (unsigned long long)sizes[i]);
        EXPECT(strstr(logged, "is not memory of this process"), "message: %s", logged);
    }
    MSCCLPPCHECK(mscclppConnect(comm, rank ^ 1, 1, buf, len, transport, NULL));
    setup(comm);
    mscclppDevConn_t *c;
    MSCCLPPCHECK(mscclppGetDeviceConnection(comm, rank ^ 1, 1, &c));
    EXPECT(zincConnPut(c, len - 8, 0, 9) == (int)mscclppInvalidArgument,
           "a put past the end of the peer's 64 KB buffer was accepted");
    destroy(comm);
    munmap(buf, len);

    /* The destroyed handle: refused everywhere, and destroyed again after a newer
     * communicator was made (which stays usable). */
    int r = -1;
    logged[0] = 0;
    EXPECT(mscclppCommDestroy(comm) == mscclppInvalidArgument, "a second destroy was accepted");
    EXPECT(strstr(logged, "is not an mscclpp communicator"), "message: %s", logged);
    EXPECT(mscclppCommRank(comm, &r) == mscclppInvalidArgument && r == -1,
           "mscclppCommRank on a destroyed comm");
    EXPECT(mscclppBootstrapBarrier(comm) == mscclppInvalidArgument,
           "mscclppBootstrapBarrier on a destroyed comm");
    EXPECT(zincConnMemAlloc(comm, 64, &p) == (int)mscclppInvalidArgument,
           "zincConnMemAlloc on a destroyed comm");
    EXPECT(mscclppConnect(comm, rank ^ 1, 2, shm, 64, mscclppTransportSHM, NULL) ==
               mscclppInvalidArgument,
           "mscclppConnect on a destroyed comm");
    EXPECT(mscclppProxyLaunch(comm) == mscclppInvalidArgument,
           "mscclppProxyLaunch on a destroyed comm");
    mscclppComm_t fresh = init();
    EXPECT(mscclppCommDestroy(comm) == mscclppInvalidArgument,
           "a second destroy after a new communicator was accepted");
    MSCCLPPCHECK(mscclppBootstrapBarrier(fresh));
    MSCCLPPCHECK(mscclppCommDestroy(fresh));
    MSCCLPPCHECK(mscclppSetLogHandler(mscclppDefaultLogHandler));
    if (failures) fprintf(stderr, "[%d] %ld failures\n", rank, failures);
    exit(failures ? 1 : 0);
}

/* For the state dump test (tests/proxy/dump_host.sh, DUMP_DIR set): each rank writes its pid
 * to DIR/pid.RANK; rank 1 writes DIR/recv and waits for a signal from rank 0, which signals
 * once DIR/go exists. */
static void dumpwait(mscclppComm_t comm)
{
    const char *dir = getenv("DUMP_DIR");
    if (!dir) exit(2);
    uint8_t *buf;
    MSCCLPPCHECK(zincConnMemAlloc(comm, 64, (void **)&buf));
    MSCCLPPCHECK(mscclppConnect(comm, rank ^ 1, 0, buf, 64, transport, NULL));
    setup(comm);
    mscclppDevConn_t *c;
    MSCCLPPCHECK(mscclppGetDeviceConnection(comm, rank ^ 1, 0, &c));
    char path[4096];
    snprintf(path, sizeof(path), "%s/pid.%d", dir, rank);
    FILE *f = fopen(path, "w");
    if (!f) exit(2);
    fprintf(f, "%d\n", (int)getpid());
    fclose(f);
    if (rank == 1) {
        snprintf(path, sizeof(path), "%s/recv", dir);
        f = fopen(path, "w");
        if (!f) exit(2);
        fclose(f);
        MSCCLPPCHECK(zincConnWait(c));
    } else {
        snprintf(path, sizeof(path), "%s/go", dir);
        for (int i = 0; i < 12000 && access(path, F_OK) != 0; i++) usleep(10000);
        MSCCLPPCHECK(zincConnSignal(c));
    }
    MSCCLPPCHECK(mscclppBootstrapBarrier(comm));
}

/* Rank 1 exits right after a signal from rank 0 (so both are past setup); rank 0's wait
 * reports it instead of waiting on. */
static void dead(mscclppComm_t comm)
{
    uint8_t *buf;
    MSCCLPPCHECK(zincConnMemAlloc(comm, 64, (void **)&buf));
    MSCCLPPCHECK(mscclppConnect(comm, rank ^ 1, 0, buf, 64, transport, NULL));
    setup(comm);
    mscclppDevConn_t *c;
    MSCCLPPCHECK(mscclppGetDeviceConnection(comm, rank ^ 1, 0, &c));
    if (rank == 1) {
        MSCCLPPCHECK(zincConnWait(c));
        _exit(0);
    }
    MSCCLPPCHECK(zincConnSignal(c));
    capture_start();
    EXPECT(zincConnWait(c) == (int)mscclppRemoteError, "wait on a dead peer did not fail");
    EXPECT(strstr(logged, "rank 1") && strstr(logged, "exited"), "message: %s", logged);
    EXPECT(zincConnPut(c, 0, 0, 8) == (int)mscclppRemoteError, "put to a dead peer did not fail");
    exit(failures ? 1 : 0);
}

/* One-sidedness (IB net, puts as RDMA writes): rank 1 sets the connection up and then makes
 * no library call and runs no proxy -- it only reads the signal word of its connection, plain
 * host memory -- while rank 0 puts and signals; each round's data must be there when the
 * round's epoch is. Rounds write distinct ranges, so rank 0 never waits for rank 1. */
enum { OS_ROUNDS = 4, OS_ROUND_BYTES = 1 << 20 };

static void onesided_put(mscclppDevConn_t *c, uint8_t *buf, int round)
{
    uint64_t base = (uint64_t)round * OS_ROUND_BYTES;
    size_t n = round == 3 ? OS_ROUND_BYTES : 4096 * (size_t)(round + 1) + 13;
    for (size_t i = 0; i < n; i++) buf[base + i] = (uint8_t)(i * 29 + (size_t)round * 7 + 1);
    if (round == 0) { /* a put, then a signal */
        MSCCLPPCHECK(zincConnPut(c, base, base, n));
        MSCCLPPCHECK(zincConnSignal(c));
    } else if (round == 2) { /* three puts, one signal */
        size_t third = n / 3;
        MSCCLPPCHECK(zincConnPut(c, base + 2 * third, base + 2 * third, n - 2 * third));
        MSCCLPPCHECK(zincConnPut(c, base, base, third));
        MSCCLPPCHECK(zincConnPut(c, base + third, base + third, third));
        MSCCLPPCHECK(zincConnSignal(c));
    } else {
        MSCCLPPCHECK(zincConnPutWithSignal(c, base, base, n));
    }
}

static void onesided(mscclppComm_t comm)
{
    size_t bytes = (size_t)OS_ROUNDS * OS_ROUND_BYTES;
    uint8_t *buf = calloc(1, bytes);
    if (!buf || nranks != 2) exit(2);
    MSCCLPPCHECK(mscclppConnect(comm, rank ^ 1, 3, buf, bytes, transport, NULL));
    MSCCLPPCHECK(mscclppConnectionSetup(comm)); /* no proxy on either rank */
    mscclppDevConn_t *c;
    MSCCLPPCHECK(mscclppGetDeviceConnection(comm, rank ^ 1, 3, &c));
    if (rank == 0) {
        for (int round = 0; round < OS_ROUNDS; round++) onesided_put(c, buf, round);
        EXPECT(zincConnFlush(c) == 0, "flush failed");
    } else {
        volatile struct mscclppDevConnSignalEpochId *sig = c->localSignalEpochId;
        for (int round = 0; round < OS_ROUNDS; round++) {
            time_t end = time(NULL) + 60;
            while (__atomic_load_n(&sig->proxy, __ATOMIC_ACQUIRE) < (uint64_t)round + 1)
                if (time(NULL) > end) {
                    fprintf(stderr, "[1] no epoch %d within 60 s\n", round + 1);
                    exit(1);
                }
            uint64_t base = (uint64_t)round * OS_ROUND_BYTES;
            size_t n = round == 3 ? OS_ROUND_BYTES : 4096 * (size_t)(round + 1) + 13;
            long bad = 0;
            for (size_t i = 0; i < n; i++)
                bad += buf[base + i] != (uint8_t)(i * 29 + (size_t)round * 7 + 1);
            for (size_t i = n; i < OS_ROUND_BYTES; i++) bad += buf[base + i] != 0;
            EXPECT(bad == 0, "round %d (%zu bytes): %ld bytes wrong when its epoch arrived", round,
                   n, bad);
        }
        EXPECT(__atomic_load_n(&sig->proxy, __ATOMIC_ACQUIRE) == OS_ROUNDS, "epoch %llu",
               (unsigned long long)sig->proxy);
    }
    MSCCLPPCHECK(mscclppBootstrapBarrier(comm));
    MSCCLPPCHECK(mscclppCommDestroy(comm));
    free(buf);
    exit(failures ? 1 : 0);
}

/* Rank 1, on another "host" (the peer watch cannot see it), exits once it saw rank 0's first
 * signal; rank 0's puts (RDMA writes) then fail, at the latest at the flush after them, with
 * ncclRemoteError naming rank 1, and the error stays with the connection. */
static void deadwrite(mscclppComm_t comm)
{
    uint8_t *buf = calloc(1, 1 << 16);
    if (!buf || nranks != 2) exit(2);
    MSCCLPPCHECK(mscclppConnect(comm, rank ^ 1, 0, buf, 1 << 16, transport, NULL));
    setup(comm);
    mscclppDevConn_t *c;
    MSCCLPPCHECK(mscclppGetDeviceConnection(comm, rank ^ 1, 0, &c));
    if (rank == 1) { /* past setup on both sides once rank 0's first signal is here */
        MSCCLPPCHECK(zincConnWait(c));
        _exit(0);
    }
    capture_start();
    int r = zincConnSignal(c);
    time_t end = time(NULL) + 60;
    while (r == 0 && time(NULL) < end) {
        r = zincConnPutWithSignal(c, 0, 0, 1 << 16);
        if (r == 0) r = zincConnFlush(c);
    }
    EXPECT(r == (int)mscclppRemoteError, "puts to a dead peer ended with %d", r);
    EXPECT(strstr(logged, "rank 1"), "message does not name rank 1: %s", logged);
    EXPECT((int)zincConnFlush(c) == r && (int)zincConnPut(c, 0, 0, 8) == r,
           "the error is not sticky");
    EXPECT(mscclppProxyStop(comm) == (mscclppResult_t)r, "mscclppProxyStop did not report it");
    proxy_up = 0;
    exit(failures ? 1 : 0);
}

/* Make this thread's process_vm_readv and process_vm_writev fail with EPERM, as a seccomp
 * profile may (the kernel refuses; nothing in zinc is told to fail). */
static void refuse_cma(void)
{
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_vm_readv, 2, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_vm_writev, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
    };
    struct sock_fprog prog = { sizeof(code) / sizeof(code[0]), code };
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
        fprintf(stderr, "[%d] cannot install the seccomp filter: %s\n", rank, strerror(errno));
        exit(1);
    }
}

/* Setup over malloc'd buffers where the kernel refuses cross-memory attach: it fails on every
 * rank with the reason and what to do, on stderr although the log handler was replaced. */
static void cmarefused(mscclppComm_t comm)
{
    refuse_cma();
    capture_start();
    size_t size = 4096;
    void *buf;
    mem_mode = 1;
    conn_alloc(comm, size, &buf);
    for (int p = 0; p < nranks; p++)
        if (p != rank)
            MSCCLPPCHECK(mscclppConnect(comm, p, 0, buf, size, mscclppTransportSHM, NULL));
    fflush(stderr);
    FILE *err = tmpfile();
    int saved = dup(2);
    EXPECT(err && saved >= 0 && dup2(fileno(err), 2) == 2, "redirect stderr: %s", strerror(errno));
    mscclppResult_t r = mscclppConnectionSetup(comm);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    char text[4096] = { 0 };
    rewind(err);
    size_t got = fread(text, 1, sizeof(text) - 1, err);
    fclose(err);
    EXPECT(r == mscclppSystemError, "setup with cross-memory attach refused returned %d", (int)r);
    EXPECT(got > 0 && strstr(text, "cross-memory attach") && strstr(text, "ptrace_scope") &&
               strstr(text, "zincConnMemAlloc") && strstr(text, strerror(EPERM)),
           "stderr does not say why and what to do: %s", text);
    EXPECT(strstr(logged, "cross-memory attach"), "the log handler was not told: %s", logged);
    MSCCLPPCHECK(mscclppBootstrapBarrier(comm));
}

int main(int argc, char **argv)
{
    struct zn_launch_info li;
    int net = argc == 4 && !strcmp(argv[2], "net");
    if (argc == 3 && !strcmp(argv[2], "malloc")) mem_mode = 1;
    if (argc == 3 && !strcmp(argv[2], "mixed")) mem_mode = 2;
    if (!zn_launch_info_get(&li) ||
        (argc != 2 && !(argc == 3 && !strcmp(argv[2], "shm")) && !net && !mem_mode) ||
        (mem_mode && strcmp(argv[1], "allgather") && strcmp(argv[1], "allreduce") &&
         strcmp(argv[1], "pingpong"))) {
        fprintf(stderr,
                "usage: zinc-run -n N msc_shm_check "
                "allgather|allreduce|pingpong|errors|bounds|dead|dumpwait [shm | net HOSTS], "
                "allgather|allreduce|pingpong malloc|mixed, cmarefused, "
                "onesided|deadwrite|misuse net HOSTS\n");
        return 2;
    }
    rank = li.rank;
    nranks = li.nranks;
    const char *what = argv[1];
    if (net) {
        /* Before the communicator exists: the host identity is read when it is made. */
        char id[32];
        snprintf(id, sizeof(id), "msc-host-%d", rank % atoi(argv[3]));
        setenv("ZINC_HOSTID", id, 1);
        transport = mscclppTransportIB;
        expect_path = getenv("MSC_EXPECT_PATH");
        if (expect_path) MSCCLPPCHECK(mscclppSetLogHandler(capture));
    }
    if ((!strcmp(what, "pingpong") || !strcmp(what, "errors") || !strcmp(what, "bounds") ||
         !strcmp(what, "dead") || !strcmp(what, "onesided") || !strcmp(what, "deadwrite") ||
         !strcmp(what, "misuse") || !strcmp(what, "cmarefused")) &&
        nranks < 2) {
        fprintf(stderr, "%s needs 2 ranks or more\n", what);
        return 2;
    }
    mscclppComm_t comm = init();
    if (!strcmp(what, "allgather"))
        allgather(comm);
    else if (!strcmp(what, "allreduce"))
        allreduce(comm);
    else if (!strcmp(what, "pingpong"))
        pingpong(comm);
    else if (!strcmp(what, "errors"))
        errors(comm);
    else if (!strcmp(what, "cmarefused"))
        cmarefused(comm);
    else if (!strcmp(what, "bounds") && net)
        bounds(comm);
    else if (!strcmp(what, "dumpwait") && nranks == 2)
        dumpwait(comm);
    else if (!strcmp(what, "misuse") && net && nranks == 2)
        misuse(comm);
    else if (!strcmp(what, "dead") && nranks == 2)
        dead(comm);
    else if (!strcmp(what, "onesided") && net && nranks == 2)
        onesided(comm);
    else if (!strcmp(what, "deadwrite") && net && nranks == 2)
        deadwrite(comm);
    else {
        fprintf(stderr,
                "unknown test %s (dead, onesided, deadwrite, misuse need exactly 2 ranks)\n", what);
        return 2;
    }
    destroy(comm);
    for (int i = 0; i < nplain; i++) free(plain_bufs[i]);
    if (failures) fprintf(stderr, "[%d] %ld failures\n", rank, failures);
    return failures ? 1 : 0;
}
