/*
 * ib_net_conformance: the net conformance suite (tests/net/conformance.c) on zinc's IB net,
 * through ibemu (ZINC_IBVERBS_LIB, set by ctest), with two QPs per connection. The net is
 * taken from the registry, so this also checks that it registers, ahead of the socket net.
 */
#include "conformance.h"
#include "net/net.h"
#include "util/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int main(void)
{
    char fabric[64];
    snprintf(fabric, sizeof(fabric), "ibconf-%d", (int)getpid());
    setenv("ZINC_IBEMU_FABRIC", fabric, 1);
    const struct zn_net *net = NULL;
    if (zn_net_select(&net) != ncclSuccess) {
        fprintf(stderr, "no net: %s\n", zn_last_error());
        return 1;
    }
    if (strcmp(net->name, "IB") != 0 || zn_net_find("Socket") == NULL) {
        fprintf(stderr, "expected the IB net first and the socket net after it, got %s\n",
                net->name);
        return 1;
    }
    int failed = nt_run_suite(net->ops, net->ctx, zn_last_error);
    char name[96];
    snprintf(name, sizeof(name), "/zinc-ibemu-%s", fabric);
    shm_unlink(name);
    return failed ? 1 : 0;
}
