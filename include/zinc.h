/*
 * zinc.h -- zinc's own extensions to the NCCL API.
 *
 * Everything NCCL defines is in nccl.h; this header adds only what NCCL does not have.
 */
#ifndef ZINC_H_
#define ZINC_H_

#include "nccl.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ZINC_VERSION_MAJOR  0
#define ZINC_VERSION_MINOR  1
#define ZINC_VERSION_PATCH  0
#define ZINC_VERSION_STRING "0.1.0"
#define ZINC_VERSION_CODE \
    (ZINC_VERSION_MAJOR * 10000 + ZINC_VERSION_MINOR * 100 + ZINC_VERSION_PATCH)

/* zinc's own version ("0.1.0"); ncclGetVersion reports the NCCL API level instead. */
const char *zincGetVersionString(void);

/* Whether comm is a host communicator (buffers in host memory, NULL stream, calls complete
 * on return): 1, or 0 for a cuda communicator. */
ncclResult_t zincCommIsHost(const ncclComm_t comm, int *isHost);

/*
 * Host-side use of MSCCL++ connections (mscclpp.h; these live in libmscclpp.so: link
 * -lmscclpp). mscclppTransportSHM connects processes of one host over host memory: each side's
 * buffer may be any host memory of its process. The peer writes a buffer from zincConnMemAlloc
 * (a zinc shared-memory segment it maps) with plain stores, and any other buffer (malloc...)
 * with cross-memory attach (process_vm_writev), which the kernel allows only where ptrace would
 * be (Yama ptrace_scope, same user and pid namespace, seccomp); mscclppConnectionSetup probes it
 * and fails with the reason, also printed to stderr once, where it is refused. Host threads move
 * data with the functions below. The results have mscclppResult_t's values.
 *
 *   zincConnPut            copy [srcOffset, +size) of localBuff to the peer's buffer at
 *                          dstOffset; refused (ncclInvalidArgument) if either range lies outside
 *                          its registered buffer. Complete on return.
 *   zincConnSignal         raise this side's epoch and publish it to the peer (release order:
 *                          every put before it is visible to the peer's wait)
 *   zincConnPutWithSignal  both
 *   zincConnWait           wait for the peer's next signal (bounded by ZINC_TIMEOUT; a peer that
 *                          died is reported as ncclRemoteError naming it)
 *   zincConnFlush          puts are complete on return already; reports a dead peer
 * One thread at a time per connection and direction, as with MSCCL++'s device methods.
 *
 * mscclppTransportIB connections (between hosts, over zinc's IB or socket net) take the same
 * functions on any host buffer: a put is queued and moved by the net (leave its source range
 * unchanged until zincConnFlush returns), and a signal reaches the peer after every put before
 * it. On the IB net with host buffers on both sides, puts and signals are RDMA writes straight
 * into the peer's buffer and signal word (the peer's side takes no part); otherwise the peer
 * lands each put after checking the range against its own buffer. zincConnFlush waits until
 * every put and signal of the connection completed; a failed one (a dead peer) is reported by
 * it and by the next call. zincConnWait and zincConnFlush move every IB connection of the
 * communicator on while they wait, as does the thread of mscclppProxyLaunch.
 */
struct mscclppComm;
struct mscclppDevConn;
ncclResult_t zincConnMemAlloc(struct mscclppComm *comm, size_t size, void **ptr);
ncclResult_t zincConnMemFree(struct mscclppComm *comm, void *ptr);
ncclResult_t zincConnPut(struct mscclppDevConn *conn, uint64_t dstOffset, uint64_t srcOffset,
                         uint64_t size);
ncclResult_t zincConnSignal(struct mscclppDevConn *conn);
ncclResult_t zincConnPutWithSignal(struct mscclppDevConn *conn, uint64_t dstOffset,
                                   uint64_t srcOffset, uint64_t size);
ncclResult_t zincConnWait(struct mscclppDevConn *conn);
ncclResult_t zincConnFlush(struct mscclppDevConn *conn);

#ifdef __cplusplus
}
#endif

#endif /* ZINC_H_ */
