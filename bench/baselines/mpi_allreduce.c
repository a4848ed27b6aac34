/*
 * Open MPI allreduce timing, the baseline that bench/cpu-vs-baselines.sh and bench/net-vs-baselines.sh
 * compare zinc against. Float sum over MPI_COMM_WORLD, sizes MIN, 4 MIN, 16 MIN, ... up to MAX
 * bytes (defaults 8 B and 64 MB; sizes take a K, M or G suffix).
 *
 *   mpirun -np N mpi_allreduce [MAX_BYTES [MIN_BYTES]]
 *
 * Rank 0 prints "# mpi_allreduce nranks=N", a column header, then one line per size:
 * bytes, time_us (mean per call, the slowest rank's), busbw_GBs (nccl-tests' definition for
 * allreduce: bytes / time * 2(n-1)/n) and ok (1 when every element of every rank's result is
 * the expected sum; the bench scripts refuse a 0).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

/* A size in bytes, with an optional K, M or G suffix (powers of 1024). */
static size_t parse_size(const char *text)
{
    char *end = NULL;
    size_t value = strtoull(text, &end, 0);
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

/* Enough calls for a stable mean: many for latency-bound sizes, fewer for large ones. */
static int calls_for(size_t bytes)
{
    return bytes < ((size_t)1 << 20) ? 200 : 20;
}

/* Rank r contributes r + 1 at element i scaled by (i % 7 + 1), so a result that mixed up
 * elements or dropped a rank is caught, and every value is exact in float. */
static float input(int rank, size_t i)
{
    return (float)((rank + 1) * (int)(i % 7 + 1));
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, nranks = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    size_t max_bytes = argc > 1 ? parse_size(argv[1]) : (size_t)64 << 20;
    size_t min_bytes = argc > 2 ? parse_size(argv[2]) : 8;
    if (min_bytes < 4) min_bytes = 4;
    float *in = malloc(max_bytes), *out = malloc(max_bytes);
    if (in == NULL || out == NULL) {
        fprintf(stderr, "mpi_allreduce: cannot allocate 2 x %zu bytes\n", max_bytes);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    float ranks_sum = (float)(nranks * (nranks + 1) / 2);
    if (rank == 0) {
        printf("# mpi_allreduce nranks=%d\n", nranks);
        printf("# %10s %10s %10s %s\n", "bytes", "time_us", "busbw_GBs", "ok");
    }
    for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
        int count = (int)(bytes / sizeof(float)), calls = calls_for(bytes);
        for (int i = 0; i < count; i++) in[i] = input(rank, (size_t)i);
        for (int w = 0; w < 5; w++)
            MPI_Allreduce(in, out, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD);
        double start = MPI_Wtime();
        for (int c = 0; c < calls; c++)
            MPI_Allreduce(in, out, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        double mine = (MPI_Wtime() - start) / calls, slowest = 0;
        MPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        int good = 1, all_good = 0;
        for (int i = 0; i < count && good; i++) good = out[i] == ranks_sum * (float)(i % 7 + 1);
        MPI_Reduce(&good, &all_good, 1, MPI_INT, MPI_MIN, 0, MPI_COMM_WORLD);
        if (rank == 0)
            printf("%12zu %10.2f %10.3f %d\n", bytes, slowest * 1e6,
                   (double)bytes / slowest / 1e9 * 2.0 * (nranks - 1) / nranks, all_good);
    }
    free(in);
    free(out);
    MPI_Finalize();
    return 0;
}
