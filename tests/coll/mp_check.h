/*
 * Checks shared by the multi-rank test programs on the public API. The program defines
 * `static int rank;` and `static long failures;` and includes nccl.h (zinc's, or NVIDIA's for
 * the compatibility test) before this header.
 *
 *   NCCLCHECK(call)       the call must succeed, else the rank exits 2 with the error text
 *   NCCLCHECK_ASYNC(call) the same, ncclInProgress allowed (non-blocking communicators)
 *   EXPECT(cond, fmt...)  counts a failure with a message, and goes on
 *   EXPECT_FAIL(call, want, needle)  the call returns want, and ncclGetLastError holds needle
 *   CUDACHECK(call)       a CUDA runtime call must succeed (when cuda_runtime.h came first)
 *   mp_wait(comm)         polls a non-blocking communicator until it leaves ncclInProgress
 *   mp_finish(world, name) sums every rank's failures, finalizes and destroys world
 *   mp_gpu_select()       GPU programs: rank and nranks from the launcher, and the GPU to use
 *   mp_world()            sets rank and nranks from the launcher and makes the world
 *                         communicator (programs that include bootstrap/launcher.h first)
 */
#ifndef ZT_MP_CHECK_H
#define ZT_MP_CHECK_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define NCCLCHECK(call)                                                                         \
    do {                                                                                        \
        ncclResult_t r_ = (call);                                                               \
        if (r_ != ncclSuccess) {                                                                \
            fprintf(stderr, "[%d] %s:%d %s failed: %s (%s)\n", rank, __FILE__, __LINE__, #call, \
                    ncclGetErrorString(r_), ncclGetLastError(NULL));                            \
            exit(2);                                                                            \
        }                                                                                       \
    } while (0)

#define NCCLCHECK_ASYNC(call)                                                                   \
    do {                                                                                        \
        ncclResult_t r_ = (call);                                                               \
        if (r_ != ncclSuccess && r_ != ncclInProgress) {                                        \
            fprintf(stderr, "[%d] %s:%d %s failed: %s (%s)\n", rank, __FILE__, __LINE__, #call, \
                    ncclGetErrorString(r_), ncclGetLastError(NULL));                            \
            exit(2);                                                                            \
        }                                                                                       \
    } while (0)

#include "../unit/expect.h"

#include <string.h>

#define EXPECT_FAIL(call, want, needle)                                                    \
    do {                                                                                   \
        ncclResult_t r_ = (call);                                                          \
        EXPECT(r_ == (want), "%s returned %s, expected %s", #call, ncclGetErrorString(r_), \
               ncclGetErrorString(want));                                                  \
        EXPECT(strstr(ncclGetLastError(NULL), (needle)) != NULL,                           \
               "%s: message \"%s\" does not hold \"%s\"", #call, ncclGetLastError(NULL),   \
               (needle));                                                                  \
    } while (0)

#ifdef CUDART_VERSION
#define CUDACHECK(call)                                                             \
    do {                                                                            \
        cudaError_t e_ = (call);                                                    \
        if (e_ != cudaSuccess) {                                                    \
            fprintf(stderr, "[%d] %s:%d %s: %s\n", rank, __FILE__, __LINE__, #call, \
                    cudaGetErrorString(e_));                                        \
            exit(2);                                                                \
        }                                                                           \
    } while (0)
#endif

/* ncclCommGetAsyncError until comm leaves ncclInProgress (about 60 s at most); its state. */
static inline ncclResult_t mp_wait(ncclComm_t comm)
{
    ncclResult_t st = ncclInProgress;
    for (int i = 0; i < 60000 && st == ncclInProgress; i++) {
        NCCLCHECK(ncclCommGetAsyncError(comm, &st));
        if (st == ncclInProgress) {
            struct timespec ts = { 0, 1000000 };
            nanosleep(&ts, NULL);
        }
    }
    return st;
}

#ifdef ZN_BOOTSTRAP_LAUNCHER_H
/* rank and nranks from the launcher's environment, and the communicator of them all from the
 * unique id that every rank gets alike (ZINC_COMM_ID, which zinc-run sets). */
static inline ncclComm_t mp_world(void)
{
    struct zn_launch_info li;
    zn_launch_info_get(&li);
    rank = li.rank;
    nranks = li.nranks;
    ncclUniqueId id;
    ncclComm_t w = NULL;
    NCCLCHECK(ncclGetUniqueId(&id));
    NCCLCHECK(ncclCommInitRank(&w, nranks, id, rank));
    return w;
}
#endif

#if defined(CUDART_VERSION) && defined(ZN_BOOTSTRAP_LAUNCHER_H)
/* GPU programs: rank and nranks from the launcher, and this rank's GPU (local rank mod the GPU
 * count, so that ranks share GPUs when there are fewer). 0, or 77 (skip) without a GPU. */
static inline int mp_gpu_select(void)
{
    struct zn_launch_info li;
    zn_launch_info_get(&li);
    rank = li.rank;
    nranks = li.nranks;
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
        printf("SKIP: no GPU\n");
        return 77;
    }
    CUDACHECK(cudaSetDevice(li.local_rank % ndev));
    return 0;
}
#endif

/* The end of a program on host communicators: every rank's failures summed over world,
 * world finalized and destroyed; the process's exit status. */
static inline int mp_finish(ncclComm_t world, const char *name)
{
    int64_t mine = failures, total = 0;
    int n = 0;
    NCCLCHECK(ncclCommCount(world, &n));
    NCCLCHECK(ncclAllReduce(&mine, &total, 1, ncclInt64, ncclSum, world, NULL));
    NCCLCHECK(ncclCommFinalize(world));
    NCCLCHECK(ncclCommDestroy(world));
    if (rank == 0) printf("%s: %d ranks: %lld failures\n", name, n, (long long)total);
    return total ? 1 : 0;
}

#endif
