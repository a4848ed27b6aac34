/*
 * boot_death_check: a rank that dies between two bootstrap collectives is reported by rank at
 * once, not at the ZINC_TIMEOUT deadline. The collectives run over point-to-point connections,
 * so this rests on the ring: the dead rank's successor sees its connection end without the BYE
 * of a normal close, fails, and its ABORT goes around the ring to everyone else.
 *
 *   zinc-run -n 4 boot_death_check
 *
 * The victim (the last rank but one) leaves with _exit, as a crash would, only after every
 * other rank told it that the first barrier completed there, so that nothing but the second
 * barrier can see the death. Every survivor's second barrier must fail naming the victim, well
 * before ZINC_TIMEOUT (60 s in the test; the check allows half of it).
 */
#include "bootstrap/bootstrap.h"
#include "bootstrap/launcher.h"
#include "util/clock.h"
#include "util/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int rank, nranks;
static int failures;

#include "../coll/mp_check.h"

enum { TAG_DONE = 11 };

int main(void)
{
    struct zn_launch_info li;
    zn_launch_info_get(&li);
    rank = li.rank;
    nranks = li.nranks;
    if (nranks < 3) {
        fprintf(stderr, "boot_death_check needs 3 or more ranks\n");
        return 2;
    }
    int victim = nranks - 2;
    ncclUniqueId id;
    NCCLCHECK(zn_boot_get_unique_id(&id));
    atomic_int abort_flag = 0;
    struct zn_boot *b;
    NCCLCHECK(zn_boot_init(&id, rank, nranks, &abort_flag, &b));
    NCCLCHECK(zn_boot_barrier(b));
    int one = 1;
    if (rank == victim) {
        for (int r = 0; r < nranks; r++)
            if (r != victim) NCCLCHECK(zn_boot_recv(b, r, TAG_DONE, &one, sizeof(one)));
        _exit(0); /* no destroy, no BYE: what a crash leaves */
    }
    NCCLCHECK(zn_boot_send(b, victim, TAG_DONE, &one, sizeof(one)));
    int64_t t0 = zn_now_ns();
    ncclResult_t r = zn_boot_barrier(b);
    double s = (zn_now_ns() - t0) / 1e9;
    char want[32];
    snprintf(want, sizeof(want), "rank %d (", victim);
    EXPECT(r == ncclRemoteError, "barrier after rank %d died returned %d, expected %d", victim, r,
           ncclRemoteError);
    EXPECT(strstr(zn_last_error(), want) != NULL, "the error does not name rank %d: %s", victim,
           zn_last_error());
    EXPECT(s < zn_timeout_ns() / 2e9, "the death was reported after %.1f s (ZINC_TIMEOUT %.0f s)",
           s, zn_timeout_ns() / 1e9);
    zn_boot_destroy(b);
    if (failures) {
        fprintf(stderr, "[%d] boot_death_check: %d failure(s)\n", rank, failures);
        return 1;
    }
    if (rank == 0) printf("boot_death_check: %d ranks, rank %d's death reported\n", nranks, victim);
    return 0;
}
