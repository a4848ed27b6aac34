/*
 * The smallest program built against an installed zinc (install_test.sh): one allreduce on
 * the ranks zinc-run starts, checked, and a check that the library in the process is the
 * installed one (argv[1] is the installation prefix).
 */
#define _GNU_SOURCE
#include <nccl.h>
#include <zinc.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    const char *r = getenv("ZINC_RANK"), *n = getenv("ZINC_NRANKS");
    int rank = r ? atoi(r) : 0, nranks = n ? atoi(n) : 1;
    Dl_info info;
    memset(&info, 0, sizeof(info));
    dladdr((void *)ncclAllReduce, &info);
    if (argc > 1 && argv[1][0] && (!info.dli_fname || !strstr(info.dli_fname, argv[1]))) {
        /* A static build has the code in the executable itself. */
        if (!info.dli_fname || strstr(info.dli_fname, "libnccl")) {
            fprintf(stderr, "hello: ncclAllReduce comes from %s, not from %s\n",
                    info.dli_fname ? info.dli_fname : "?", argv[1]);
            return 1;
        }
    }
    ncclUniqueId id;
    ncclComm_t comm;
    int v = 0;
    if (ncclGetVersion(&v) || ncclGetUniqueId(&id) || ncclCommInitRank(&comm, nranks, id, rank)) {
        fprintf(stderr, "hello: init failed: %s\n", ncclGetLastError(NULL));
        return 1;
    }
    double x = rank + 1, y = 0;
    if (ncclAllReduce(&x, &y, 1, ncclDouble, ncclSum, comm, NULL) != ncclSuccess ||
        y != nranks * (nranks + 1) / 2.0) {
        fprintf(stderr, "hello: allreduce gave %g: %s\n", y, ncclGetLastError(comm));
        return 1;
    }
    ncclCommFinalize(comm);
    ncclCommDestroy(comm);
    if (rank == 0)
        printf("hello: zinc %s, NCCL API %d, %d rank(s), allreduce ok (%s)\n",
               zincGetVersionString(), v, nranks, info.dli_fname ? info.dli_fname : "?");
    return 0;
}
