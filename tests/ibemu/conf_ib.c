/*
 * ib_net_conformance: the net conformance suite (tests/net/conformance.c) on zinc's IB net,
 * through ibemu (ZINC_IBVERBS_LIB, set by ctest), with two QPs per connection. The net is
 * taken from the registry, so this also checks that it registers, ahead of the socket net.
 */
#include "conformance.h"
#include "net/net.h"
#include "util/err.h"

#include <dirent.h>
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
    /* The fabric, and the QP segments of the peer that the suite kills. */
    char prefix[96];
    int n = snprintf(prefix, sizeof(prefix), "zinc-ibemu-%s", fabric);
    DIR *d = opendir("/dev/shm");
    for (struct dirent *e; d && (e = readdir(d)) != NULL;) {
        if (strncmp(e->d_name, prefix, (size_t)n) != 0 || (e->d_name[n] && e->d_name[n] != '-'))
            continue;
        char name[300];
        snprintf(name, sizeof(name), "/%s", e->d_name);
        shm_unlink(name);
    }
    if (d) closedir(d);
    return failed ? 1 : 0;
}
