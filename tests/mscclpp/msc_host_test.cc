// The host side of an MSCCL++ 0.1 program, in C++ as MSCCL++ 0.1's users wrote it (default
// arguments, mscclppRegisteredMemory's std::vector), on host memory: bootstrap allgather and
// barrier, connections declared with and without a buffer, mscclppGetAllDeviceConnections,
// mscclppRegisterBuffer + mscclppRegisteredBufferWrite, the proxy started and stopped. Each
// result is checked against what every rank must see. Started by zinc-run.
#include "mscclpp.h"
#include "zinc.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

static int rank, nranks;
static long failures;

#include "msc_check.h"

int main()
{
    const char *r = getenv("ZINC_RANK"), *n = getenv("ZINC_NRANKS"), *ip = getenv("ZINC_COMM_ID");
    if (!r || !n || !ip) {
        fprintf(stderr, "run under zinc-run\n");
        return 2;
    }
    rank = atoi(r);
    nranks = atoi(n);
    mscclppComm_t comm;
    MSCCLPPCHECK(mscclppCommInitRank(&comm, nranks, ip, rank));

    std::vector<int> ranks(nranks, -1);
    ranks[rank] = rank * 10;
    MSCCLPPCHECK(mscclppBootstrapAllGather(comm, ranks.data(), sizeof(int)));
    for (int i = 0; i < nranks; i++) EXPECT(ranks[i] == i * 10, "allgather[%d] = %d", i, ranks[i]);
    MSCCLPPCHECK(mscclppBootstrapBarrier(comm));

    // Connections along the ring, each edge tagged with the rank it starts from: to the next
    // rank with a buffer (no ibDev: the default argument), to the previous one without, its
    // buffer given before setup.
    const size_t bytes = 1 << 16;
    uint8_t *data, *reg;
    MSCCLPPCHECK(zincConnMemAlloc(comm, bytes, (void **)&data));
    MSCCLPPCHECK(zincConnMemAlloc(comm, bytes * nranks, (void **)&reg));
    int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
    if (nranks > 1) {
        MSCCLPPCHECK(mscclppConnect(comm, next, rank, data, bytes, mscclppTransportSHM));
        MSCCLPPCHECK(mscclppConnectWithoutBuffer(comm, prev, prev, mscclppTransportSHM));
        mscclppBufferHandle_t h = 0;
        MSCCLPPCHECK(mscclppRegisterBufferForConnection(comm, 1, data, bytes, &h));
        EXPECT(h == 1, "first data buffer handle %u", h);
    }
    MSCCLPPCHECK(mscclppConnectionSetup(comm));
    mscclppDevConn_t *conns;
    int nconns;
    MSCCLPPCHECK(mscclppGetAllDeviceConnections(comm, &conns, &nconns));
    EXPECT(nconns == (nranks > 1 ? 2 : 0), "%d connections", nconns);
    for (int i = 0; i < nconns; i++) {
        EXPECT(conns[i].remoteRank == (i == 0 ? next : prev) &&
                   conns[i].tag == (i == 0 ? rank : prev),
               "connection %d: rank %d tag %d", i, conns[i].remoteRank, conns[i].tag);
        EXPECT(conns[i].localBuff == data && conns[i].remoteBuff != nullptr,
               "connection %d buffers", i);
    }
    MSCCLPPCHECK(mscclppProxyLaunch(comm));

    // Every rank writes its slice of reg into every connection's peer's registered buffer.
    mscclppRegisteredMemory regMem;
    MSCCLPPCHECK(mscclppRegisterBuffer(comm, reg, bytes * nranks, &regMem));
    EXPECT((int)regMem.p2p.size() == nconns, "%zu registered peers", regMem.p2p.size());
    for (size_t i = 0; i < bytes; i++) reg[rank * bytes + i] = (uint8_t)(rank * 37 + i * 11);
    MSCCLPPCHECK(mscclppRegisteredBufferWrite(comm, &regMem, reg, bytes, (uint32_t)(rank * bytes),
                                              (uint32_t)(rank * bytes), 0));
    EXPECT(mscclppRegisteredBufferWrite(comm, &regMem, reg, bytes, 0, (uint32_t)(nranks * bytes),
                                        0) == (nconns ? mscclppInvalidArgument : mscclppSuccess),
           "a write past the registered buffers accepted");
    MSCCLPPCHECK(mscclppBootstrapBarrier(comm));
    for (int p : { next, prev }) {
        if (p == rank) continue;
        long bad = 0;
        for (size_t i = 0; i < bytes; i++) bad += reg[p * bytes + i] != (uint8_t)(p * 37 + i * 11);
        EXPECT(bad == 0, "slice of rank %d: %ld bytes wrong", p, bad);
    }
    MSCCLPPCHECK(mscclppProxyStop(comm));
    MSCCLPPCHECK(mscclppCommDestroy(comm));
    if (failures) fprintf(stderr, "[%d] %ld failures\n", rank, failures);
    return failures ? 1 : 0;
}
