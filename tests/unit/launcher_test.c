/* Rank and size from each launcher's environment variables (bootstrap/launcher.h). */
#include "bootstrap/launcher.h"
#include "zt.h"

static const char *all_vars[] = { "ZINC_RANK",
                                  "ZINC_NRANKS",
                                  "ZINC_LOCAL_RANK",
                                  "ZINC_LOCAL_NRANKS",
                                  "OMPI_COMM_WORLD_RANK",
                                  "OMPI_COMM_WORLD_SIZE",
                                  "OMPI_COMM_WORLD_LOCAL_RANK",
                                  "OMPI_COMM_WORLD_LOCAL_SIZE",
                                  "PMI_RANK",
                                  "PMI_SIZE",
                                  "MPI_LOCALRANKID",
                                  "MPI_LOCALNRANKS",
                                  "PMIX_RANK",
                                  "SLURM_PROCID",
                                  "SLURM_NTASKS",
                                  "SLURM_LOCALID",
                                  "SLURM_NTASKS_PER_NODE",
                                  "RANK",
                                  "WORLD_SIZE",
                                  "LOCAL_RANK",
                                  "LOCAL_WORLD_SIZE" };

static void clear(void)
{
    for (size_t i = 0; i < sizeof(all_vars) / sizeof(all_vars[0]); i++) unsetenv(all_vars[i]);
}

static void check(const char *launcher, const char *const *kv, int rank, int size, int lrank,
                  int lsize, int *failed)
{
    clear();
    for (int i = 0; kv[i]; i += 2) setenv(kv[i], kv[i + 1], 1);
    struct zn_launch_info li;
    int found = zn_launch_info_get(&li);
    if (!found || strcmp(li.launcher, launcher) || li.rank != rank || li.nranks != size ||
        li.local_rank != lrank || li.local_nranks != lsize) {
        fprintf(stderr, "%s: got %s %d/%d local %d/%d\n", launcher, found ? li.launcher : "none",
                li.rank, li.nranks, li.local_rank, li.local_nranks);
        *failed = 1;
    }
}

ZT_TEST(launchers)
{
    int failed = 0;
    const char *zr[] = { "ZINC_RANK",         "3", "ZINC_NRANKS", "8", "ZINC_LOCAL_RANK", "3",
                         "ZINC_LOCAL_NRANKS", "8", NULL };
    check("zinc-run", zr, 3, 8, 3, 8, &failed);
    const char *ompi[] = { "OMPI_COMM_WORLD_RANK",
                           "5",
                           "OMPI_COMM_WORLD_SIZE",
                           "16",
                           "OMPI_COMM_WORLD_LOCAL_RANK",
                           "1",
                           "OMPI_COMM_WORLD_LOCAL_SIZE",
                           "4",
                           NULL };
    check("openmpi", ompi, 5, 16, 1, 4, &failed);
    const char *mpich[] = { "PMI_RANK",        "2", "PMI_SIZE", "4", "MPI_LOCALRANKID", "0",
                            "MPI_LOCALNRANKS", "2", NULL };
    check("mpich", mpich, 2, 4, 0, 2, &failed);
    const char *slurm[] = {
        "SLURM_PROCID", "7", "SLURM_NTASKS", "8", "SLURM_LOCALID", "3", "SLURM_NTASKS_PER_NODE",
        "4(x2)",        NULL
    };
    check("slurm", slurm, 7, 8, 3, 4, &failed);
    const char *torch[] = { "RANK", "1", "WORLD_SIZE", "2", "LOCAL_RANK", "1", NULL };
    check("torchrun", torch, 1, 2, 1, 2, &failed); /* no LOCAL_WORLD_SIZE: grown to fit */
    ZT_ASSERT(!failed);
    clear();
    struct zn_launch_info li;
    ZT_EQ_INT(zn_launch_info_get(&li), 0);
    ZT_EQ_INT(li.nranks, 1);
    /* A rank outside the size is not believed. */
    setenv("RANK", "4", 1);
    setenv("WORLD_SIZE", "4", 1);
    ZT_EQ_INT(zn_launch_info_get(&li), 0);
    clear();
}

ZT_MAIN(ZT_CASE(launchers))
