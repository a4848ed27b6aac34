// Gloo allreduce timing, the baseline that bench/cpu-vs-baselines.sh and bench/net-vs-baselines.sh compare
// zinc against: Gloo's ring allreduce (float sum) over its TCP device on 127.0.0.1, ranks
// meeting through a file store. Sizes MIN, 4 MIN, 16 MIN, ... up to MAX bytes (defaults 8 B and
// 64 MB; sizes take a K, M or G suffix). Start one process per rank:
//
//   gloo_allreduce RANK NRANKS STORE_DIR [MAX_BYTES [MIN_BYTES]]
//
// Rank 0 prints "# gloo_allreduce nranks=N", a column header, then one line per size: bytes,
// time_us (mean per call on rank 0), busbw_GBs (nccl-tests' definition for allreduce:
// bytes / time * 2(n-1)/n) and ok (1 when rank 0's result is the expected sum everywhere).
#include <gloo/allreduce_ring.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

namespace
{

// A size in bytes, with an optional K, M or G suffix (powers of 1024).
size_t parseSize(const char *text)
{
    char *end = nullptr;
    const size_t value = strtoull(text, &end, 0);
    switch (*end) {
    case 'K':
    case 'k': return value << 10;
    case 'M':
    case 'm': return value << 20;
    case 'G':
    case 'g': return value << 30;
    default: return value;
    }
}

// Many calls for latency-bound sizes, fewer for large ones.
int callsFor(size_t bytes)
{
    return bytes < (size_t(1) << 20) ? 200 : 20;
}

// Rank r holds (r + 1) * (i % 7 + 1) at element i: exact in float, and a mixed-up or missing
// contribution changes the sum.
void fill(std::vector<float> &buf, size_t count, int rank)
{
    for (size_t i = 0; i < count; i++) buf[i] = float((rank + 1) * int(i % 7 + 1));
}

} // namespace

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: %s RANK NRANKS STORE_DIR [MAX_BYTES [MIN_BYTES]]\n", argv[0]);
        return 2;
    }
    const int rank = atoi(argv[1]), nranks = atoi(argv[2]);
    const size_t maxBytes = argc > 4 ? parseSize(argv[4]) : size_t(64) << 20;
    size_t minBytes = argc > 5 ? parseSize(argv[5]) : 8;
    if (minBytes < sizeof(float)) minBytes = sizeof(float);

    gloo::transport::tcp::attr attr;
    attr.hostname = "127.0.0.1";
    auto device = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore store(argv[3]);
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, nranks);
    context->connectFullMesh(store, device);

    std::vector<float> buf(maxBytes / sizeof(float));
    const float ranksSum = float(nranks * (nranks + 1) / 2);
    if (rank == 0) {
        printf("# gloo_allreduce nranks=%d\n", nranks);
        printf("# %10s %10s %10s %s\n", "bytes", "time_us", "busbw_GBs", "ok");
    }
    for (size_t bytes = minBytes; bytes <= maxBytes; bytes *= 4) {
        const size_t count = bytes / sizeof(float);
        const int calls = callsFor(bytes);
        std::vector<float *> ptrs{ buf.data() };
        gloo::AllreduceRing<float> allreduce(context, ptrs, int(count));
        for (int w = 0; w < 5; w++) {
            fill(buf, count, rank);
            allreduce.run();
        }
        // The timed calls reduce in place, so the values grow; only the first call's result is
        // checked, after the timing, on fresh inputs.
        auto start = std::chrono::steady_clock::now();
        for (int c = 0; c < calls; c++) allreduce.run();
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / calls;
        fill(buf, count, rank);
        allreduce.run();
        int good = 1;
        for (size_t i = 0; i < count && good; i++) good = buf[i] == ranksSum * float(i % 7 + 1);
        if (rank == 0)
            printf("%12zu %10.2f %10.3f %d\n", bytes, seconds * 1e6,
                   double(bytes) / seconds / 1e9 * 2.0 * (nranks - 1) / nranks, good);
    }
    return 0;
}
