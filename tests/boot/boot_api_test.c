/*
 * boot_api_check: rendezvous through the public API only, the way an application does it under
 * a launcher: every rank takes the unique id from ncclGetUniqueId (the same on every rank when
 * ZINC_COMM_ID is set, as zinc-run does), calls ncclCommInitRank, and all-gathers its rank.
 *
 *   zinc-run -n 64 boot_api_check
 */
#include "nccl.h"
#include "bootstrap/launcher.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int main(void)
{
    struct zn_launch_info li;
    zn_launch_info_get(&li);
    int rank = li.rank, nranks = li.nranks;
    ncclUniqueId id;
    ncclComm_t comm;
    ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess) {
        fprintf(stderr, "[%d] ncclGetUniqueId: %s\n", rank, ncclGetLastError(NULL));
        return 2;
    }
    double t0 = now_ms();
    r = ncclCommInitRank(&comm, nranks, id, rank);
    if (r != ncclSuccess) {
        fprintf(stderr, "[%d] ncclCommInitRank: %s (%s)\n", rank, ncclGetErrorString(r),
                ncclGetLastError(NULL));
        return 2;
    }
    double init_ms = now_ms() - t0;
    int failures = 0, count = -1, me = -1;
    ncclCommCount(comm, &count);
    ncclCommUserRank(comm, &me);
    if (count != nranks || me != rank) {
        fprintf(stderr, "[%d] FAIL: ncclCommCount %d / ncclCommUserRank %d\n", rank, count, me);
        failures++;
    }
    int32_t mine[2] = { rank, rank * 7 + 3 };
    int32_t *all = malloc(sizeof(mine) * (size_t)nranks);
    for (int i = 0; i < 2 * nranks; i++) all[i] = -1;
    r = ncclAllGather(mine, all, 2, ncclInt32, comm, NULL);
    if (r != ncclSuccess) {
        fprintf(stderr, "[%d] ncclAllGather: %s (%s)\n", rank, ncclGetErrorString(r),
                ncclGetLastError(comm));
        return 2;
    }
    for (int i = 0; i < nranks; i++)
        if (all[2 * i] != i || all[2 * i + 1] != i * 7 + 3) {
            fprintf(stderr, "[%d] FAIL: allgather slot %d holds %d,%d\n", rank, i, all[2 * i],
                    all[2 * i + 1]);
            failures++;
        }
    free(all);
    r = ncclCommDestroy(comm);
    if (r != ncclSuccess) {
        fprintf(stderr, "[%d] ncclCommDestroy: %s\n", rank, ncclGetErrorString(r));
        failures++;
    }
    if (failures) return 1;
    if (rank == 0)
        printf("boot_api_check: %d ranks joined and all-gathered (init %.0f ms on rank 0)\n",
               nranks, init_ms);
    return 0;
}
