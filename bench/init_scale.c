/*
 * One rank of bench/init-scale.sh: ncclCommInitRank, one 8-byte allreduce (checked), then
 * ncclCommDestroy, under zinc-run. Prints one line per rank with the wall-clock times (ms since
 * the epoch) at which main started and each step ended, for the script to compare across
 * ranks: "rank R start S init I allreduce A destroy D".
 */
#include <nccl.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

#define TRY(call)                                                                             \
    do {                                                                                      \
        ncclResult_t r_ = (call);                                                             \
        if (r_ != ncclSuccess) {                                                              \
            fprintf(stderr, "rank %d: %s failed: %s\n", rank, #call, ncclGetLastError(NULL)); \
            return 1;                                                                         \
        }                                                                                     \
    } while (0)

int main(void)
{
    double t0 = now_ms();
    const char *r = getenv("ZINC_RANK"), *n = getenv("ZINC_NRANKS");
    if (!r || !n) {
        fprintf(stderr, "init_scale: start it with zinc-run\n");
        return 2;
    }
    int rank = atoi(r), nranks = atoi(n);
    ncclUniqueId id;
    TRY(ncclGetUniqueId(&id)); /* from ZINC_COMM_ID: the same on every rank */
    ncclComm_t comm;
    TRY(ncclCommInitRank(&comm, nranks, id, rank));
    double t1 = now_ms();
    double *buf = malloc(sizeof(double));
    *buf = rank + 1;
    TRY(ncclAllReduce(buf, buf, 1, ncclDouble, ncclSum, comm, NULL));
    double t2 = now_ms();
    if (*buf != (double)nranks * (nranks + 1) / 2) {
        fprintf(stderr, "rank %d: allreduce gave %g, expected %g\n", rank, *buf,
                (double)nranks * (nranks + 1) / 2);
        return 1;
    }
    TRY(ncclCommDestroy(comm));
    double t3 = now_ms();
    printf("rank %d start %.1f init %.1f allreduce %.1f destroy %.1f\n", rank, t0, t1, t2, t3);
    free(buf);
    return 0;
}
