/*
 * ib_net_conformance: the net conformance suite (tests/net/conformance.c) on zinc's IB net,
 * through ibemu (ZINC_IBVERBS_LIB, set by ctest), with two QPs per connection. The net is
 * taken from the registry, so this also checks that it registers, ahead of the socket net.
 */
#include "conformance.h"
#include "net/net_layer.h"
#include "test_fabric.h"
#include "util/err.h"

#include <stdio.h>
#include <string.h>

static int suite(void *arg)
{
    (void)arg;
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
    return nt_run_suite(net->ops, net->ctx, zn_last_error) ? 1 : 0;
}

int main(void)
{
    /* The fabric, and the QP segments of the peer that the suite kills, are removed after. */
    return ibemu_test_run("ibconf", suite, NULL);
}
