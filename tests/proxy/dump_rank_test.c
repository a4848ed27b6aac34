/*
 * A rank of a host-only job that sits in a call until told to go on, for the state dump test
 * (dump_host.sh): rank 1 waits in ncclRecv from rank 0, rank 0 waits for the file DIR/go
 * before it sends. Each rank writes its pid to DIR/pid.RANK first, and rank 1 writes DIR/recv
 * just before its receive. Usage (under zinc-run, DUMP_DIR=DIR): dump_rank
 */
#include "bootstrap/launcher.h"
#include "nccl.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int rank, nranks;
static long failures;
#include "mp_check.h"

static void touch(const char *dir, const char *name, long value)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f) exit(2);
    fprintf(f, "%ld\n", value);
    fclose(f);
}

int main(void)
{
    const char *dir = getenv("DUMP_DIR");
    if (!dir) {
        fprintf(stderr, "dump_rank: DUMP_DIR is not set\n");
        return 2;
    }
    ncclComm_t world = mp_world();
    if (nranks != 2) {
        fprintf(stderr, "dump_rank: needs 2 ranks\n");
        return 2;
    }
    char name[32];
    snprintf(name, sizeof(name), "pid.%d", rank);
    touch(dir, name, (long)getpid());
    int buf[4] = { 0 };
    if (rank == 1) {
        touch(dir, "recv", 1);
        NCCLCHECK(ncclRecv(buf, 4, ncclInt, 0, world, NULL));
        EXPECT(buf[0] == 10 && buf[3] == 13, "received %d..%d", buf[0], buf[3]);
    } else {
        char go[4096];
        snprintf(go, sizeof(go), "%s/go", dir);
        for (int i = 0; i < 12000 && access(go, F_OK) != 0; i++) usleep(10000);
        for (int i = 0; i < 4; i++) buf[i] = 10 + i;
        NCCLCHECK(ncclSend(buf, 4, ncclInt, 1, world, NULL));
    }
    return mp_finish(world, "dump_rank");
}
