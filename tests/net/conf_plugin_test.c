/*
 * net_conf_plugin_*: the conformance suite on a net loaded from a plugin through the
 * registry (NCCL_NET_PLUGIN, set by ctest).
 *
 *   net_conf_plugin [NAME VERSION [count]]     (default: Socket 11, zinc's own plugin)
 *
 * checks that the registry's first net is NAME from a plugin's ncclNetPlugin_vVERSION (plugin
 * nets come before the built-in ones), runs the suite on it, and with `count` (the counting
 * plugin of count_plugin.c) checks the plugin's own call counts against the suite's.
 *
 * With ZINC_IBVERBS_LIB set (the verbs emulation, tests/ibemu), zinc's plugin exports its IB
 * net (NAME "IB"); the suite then runs on a fabric of its own, removed when it ends.
 */
#include "conformance.h"
#include "net/net_layer.h"
#include "test_fabric.h"
#include "util/err.h"
#include "zt.h"

#include <dlfcn.h>
#include <stdlib.h>

typedef long (*count_fn)(const char *slot);

static int check_counts(void)
{
    void *h = dlopen("libnccl-net-count.so", RTLD_NOW | RTLD_NOLOAD);
    count_fn get = h ? (count_fn)dlsym(h, "zn_test_count_plugin_calls") : NULL;
    if (!get) {
        fprintf(stderr, "the counting plugin is not loaded: %s\n", dlerror());
        return 1;
    }
    struct {
        const char *slot;
        long want;
    } want[] = {
        { "listen", nt_tally.listen },
        { "connect", nt_tally.connect },
        { "accept", nt_tally.accept },
        { "isend", nt_tally.isend },
        { "irecv", nt_tally.irecv },
        { "test", nt_tally.test },
        { "closeSend", nt_tally.close_send },
        { "closeRecv", nt_tally.close_recv },
        { "closeListen", nt_tally.close_listen },
        { "init", 1 },
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        long got = get(want[i].slot);
        fprintf(stderr, "%-4s %s: plugin counted %ld, the suite made %ld\n",
                got == want[i].want ? "ok" : "FAIL", want[i].slot, got, want[i].want);
        bad += got != want[i].want || got <= 0;
    }
    return bad;
}

struct args {
    int argc;
    char **argv;
};

static int suite(void *arg)
{
    int argc = ((struct args *)arg)->argc;
    char **argv = ((struct args *)arg)->argv;
    const struct zn_net *net = zn_net_get(0);
    if (!net || strcmp(net->name, argv[1]) != 0 || net->plugin_version != atoi(argv[2])) {
        fprintf(stderr, "expected net %s from a plugin's v%s table first, got %s (v%d)\n", argv[1],
                argv[2], net ? net->name : "none", net ? net->plugin_version : 0);
        return 1;
    }
    int failed = nt_run_suite(net->ops, net->ctx, NULL);
    if (argc > 3 && strcmp(argv[3], "count") == 0) failed += check_counts();
    return failed ? 1 : 0;
}

int main(int argc, char **argv)
{
    static char *defaults[] = { NULL, "Socket", "11" }; /* zinc's own plugin */
    if (argc < 3) argv = defaults, argc = 3;
    struct args a = { argc, argv };
    const char *emu = getenv("ZINC_IBVERBS_LIB");
    return emu && emu[0] ? ibemu_test_run("netconf-plugin", suite, &a) : suite(&a);
}
