/*
 * Rank and size from the environment of the launcher that started this process.
 *
 * Header-only on purpose: zinc-perf includes it too, and zinc-perf must link against nothing
 * but the public NCCL API (so that the same binary runs on real NCCL).
 *
 * Checked in this order (the first launcher whose variables are all present wins):
 *   zinc-run      ZINC_RANK, ZINC_NRANKS, ZINC_LOCAL_RANK, ZINC_LOCAL_NRANKS
 *   Open MPI      OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE
 *   MPICH/Hydra   PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS
 *   PMIx          PMIX_RANK (size from the first of the above that has it)
 *   Slurm srun    SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NTASKS_PER_NODE
 *   torchrun      RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE
 * Local values default to 0 and 1 when a launcher does not give them.
 */
#ifndef ZN_BOOTSTRAP_LAUNCHER_H
#define ZN_BOOTSTRAP_LAUNCHER_H

#include <stdlib.h>
#include <string.h>

struct zn_launch_info {
    int rank, nranks;
    int local_rank, local_nranks;
    const char *launcher; /* "zinc-run", "openmpi", "mpich", "slurm", "torchrun" or NULL */
};

static inline int zn_launch_env_int(const char *name, int *out)
{
    const char *v = getenv(name);
    if (!v || !*v) return 0;
    char *end;
    long x = strtol(v, &end, 10);
    /* Slurm writes SLURM_NTASKS_PER_NODE as "4(x2)"; the leading number is what we want. */
    if (end == v || x < 0 || x > 1 << 30) return 0;
    *out = (int)x;
    return 1;
}

/* Fill info from the environment. Returns 1 if a launcher was recognised, 0 otherwise (then
 * info describes a single rank). */
static inline int zn_launch_info_get(struct zn_launch_info *info)
{
    static const struct {
        const char *launcher, *rank, *size, *lrank, *lsize;
    } table[] = {
        { "zinc-run", "ZINC_RANK", "ZINC_NRANKS", "ZINC_LOCAL_RANK", "ZINC_LOCAL_NRANKS" },
        { "openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
          "OMPI_COMM_WORLD_LOCAL_SIZE" },
        { "mpich", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS" },
        { "pmix", "PMIX_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
          "OMPI_COMM_WORLD_LOCAL_SIZE" },
        { "slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE" },
        { "torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE" },
    };
    memset(info, 0, sizeof(*info));
    info->nranks = 1;
    info->local_nranks = 1;
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
        int rank, size;
        if (!zn_launch_env_int(table[i].rank, &rank) || !zn_launch_env_int(table[i].size, &size))
            continue;
        if (size < 1 || rank >= size) continue;
        info->rank = rank;
        info->nranks = size;
        info->launcher = table[i].launcher;
        if (!zn_launch_env_int(table[i].lrank, &info->local_rank)) info->local_rank = 0;
        if (!zn_launch_env_int(table[i].lsize, &info->local_nranks)) info->local_nranks = 1;
        if (info->local_rank >= info->local_nranks) info->local_nranks = info->local_rank + 1;
        return 1;
    }
    return 0;
}

#endif
