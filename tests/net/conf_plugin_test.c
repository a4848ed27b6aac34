/*
 * net_conf_plugin_*: the conformance suite on a net loaded from a plugin through the
 * registry (NCCL_NET_PLUGIN, set by ctest).
 *
 *   net_conf_plugin [NAME VERSION [count]]     (default: Socket 12, zinc's own plugin)
 *
 * checks that the registry's first net is NAME from a plugin's ncclNetPlugin_vVERSION (plugin
 * nets come before the built-in ones), that its properties through that version's table (and
 * zinc's adapters, below v12) are those of zinc's built-in net of the same name as far as the
 * version carries them, runs the suite on it, and with `count` (the counting plugin of
 * count_plugin.c) checks the plugin's own call counts against the suite's.
 *
 * The rail and plane ids must be those of the built-in net through v12 and NCCL_NET_ID_UNDEF
 * through older tables; ZN_TEST_EXPECT_IDS=RAIL:PLANE also pins the built-in net's (the IB
 * net's come from ZINC_IB_HCA).
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* Device 0's properties through the plugin against the built-in net's (registered after it):
 * the one of the same name, or the first (the one zinc's plugin exports) for the counting
 * plugin, which wraps zinc's. */
static int check_properties(const struct zn_net *plug)
{
    const struct zn_net *own = NULL, *first = NULL;
    for (int i = 1; i < zn_net_count(); i++) {
        const struct zn_net *n = zn_net_get(i);
        if (n->plugin_version != 0) continue;
        if (!first) first = n;
        if (strcmp(n->name, plug->name) == 0) own = n;
    }
    if (!own) own = first;
    if (!own) {
        fprintf(stderr, "no built-in net %s to compare the plugin's properties with\n", plug->name);
        return 1;
    }
    ncclNetProperties_t p, q;
    if (plug->ops->getProperties(0, &p) != ncclSuccess ||
        own->ops->getProperties(0, &q) != ncclSuccess) {
        fprintf(stderr, "getProperties(0) failed: %s\n", zn_last_error());
        return 1;
    }
    int v = plug->plugin_version, bad = 0;
#define SAME(cond, what)                                           \
    do {                                                           \
        if (!(cond)) {                                             \
            fprintf(stderr, "FAIL v%d properties: %s\n", v, what); \
            bad++;                                                 \
        }                                                          \
    } while (0)
    SAME(strcmp(p.name, q.name) == 0, "name");
    SAME(p.guid == q.guid && p.ptrSupport == q.ptrSupport, "guid, ptrSupport");
    SAME(p.speed == q.speed && p.port == q.port && p.maxComms == q.maxComms, "speed, port, comms");
    SAME(p.maxRecvs == q.maxRecvs && p.netDeviceType == q.netDeviceType, "maxRecvs, device type");
    SAME(p.regIsGlobal == (v >= 8 ? q.regIsGlobal : 0), "regIsGlobal");
    SAME(p.vProps.ndevs == 1 && p.vProps.devs[0] == 0, "vProps: device 0 alone");
    SAME(p.maxP2pBytes == (v >= 9 ? q.maxP2pBytes : (size_t)NCCL_NET_MAX_SIZE_LEGACY),
         "maxP2pBytes");
    SAME(p.maxMultiRequestSize == (v >= 11 ? q.maxMultiRequestSize : 1), "maxMultiRequestSize");
    SAME(p.railId == (v >= 12 ? q.railId : NCCL_NET_ID_UNDEF), "railId");
    SAME(p.planeId == (v >= 12 ? q.planeId : NCCL_NET_ID_UNDEF), "planeId");
    const char *ids = getenv("ZN_TEST_EXPECT_IDS");
    int rail = NCCL_NET_ID_UNDEF, plane = NCCL_NET_ID_UNDEF;
    if (ids && sscanf(ids, "%d:%d", &rail, &plane) != 2) rail = plane = -2;
    SAME(q.railId == rail && q.planeId == plane, "the built-in net's rail and plane");
#undef SAME
    fprintf(stderr, "%s v%d: rail %d plane %d (built-in: %d %d), maxP2pBytes %zu\n", p.name, v,
            p.railId, p.planeId, q.railId, q.planeId, p.maxP2pBytes);
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
    int failed = check_properties(net);
    failed += nt_run_suite(net->ops, net->ctx, NULL);
    if (argc > 3 && strcmp(argv[3], "count") == 0) failed += check_counts();
    return failed ? 1 : 0;
}

int main(int argc, char **argv)
{
    static char *defaults[] = { NULL, "Socket", "12" }; /* zinc's own plugin */
    if (argc < 3) argv = defaults, argc = 3;
    struct args a = { argc, argv };
    const char *emu = getenv("ZINC_IBVERBS_LIB");
    return emu && emu[0] ? ibemu_test_run("netconf-plugin", suite, &a) : suite(&a);
}
