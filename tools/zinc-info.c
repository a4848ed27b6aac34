/*
 * zinc-info: what this zinc build is and what it finds on this machine: version, every
 * parameter with its current value, origin and documentation, the transports and algorithms,
 * the local topology (host identity, network interface, /dev/shm, CPUs) and CUDA.
 *
 *   zinc-info            everything
 *   zinc-info params     only the parameter table
 *   zinc-info algos      only the algorithms
 *   zinc-info topology   only the host, network and shared memory
 *   zinc-info nets       only the nets (registry order) and their devices
 *   zinc-info cuda       only CUDA: driver, runtime, GPUs and how they reach each other
 */
#include "algo/algo.h"
#include "algo/gpu.h"
#include "net/net_layer.h"
#include "zinc-info-cuda.h"
#include "transport/peer.h"
#include "transport/transport.h"
#include "util/param.h"
#include "util/sock.h"
#include "zinc.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

static void print_params(void)
{
    size_t n;
    zn_param_table(&n);
    printf("Parameters (" ZN_PARAM_ORDER "):\n");
    for (size_t i = 0; i < n; i++) {
        /* The entry is formatted where ncclParamDumpAll formats it too; a value longer than
         * the line (a long ZINC_HOSTID list) gets a buffer of its size. */
        char line[2048], *big = NULL;
        int len = zn_param_format(i, "\n      ", line, sizeof(line));
        if (len >= (int)sizeof(line) && (big = malloc((size_t)len + 1)))
            zn_param_format(i, "\n      ", big, (size_t)len + 1);
        printf("  %s\n", big ? big : line);
        free(big);
    }
}

/* The GPU algorithms, with the collectives each runs (asked of its supports() for a small
 * call of 4 ranks with every peer mapped and registered buffers). */
static void print_gpu_algos(void)
{
    int n;
    const struct zn_gpu_algo *const *g = zn_gpu_algo_list(&n);
    printf("GPU algorithms (ZINC_ALGO=<value> forces one; measured crossovers pick otherwise):\n");
    for (int i = 0; i < n; i++) {
        printf("  %-12s ZINC_ALGO=%s%s%s: %s\n      collectives:", g[i]->name, g[i]->force[0],
               g[i]->force[1] ? " or " : "", g[i]->force[1] ? g[i]->force[1] : "", g[i]->doc);
        for (int c = 0; c < ZN_NCOLLS; c++) {
            struct zn_gpu_call call = { .coll = (enum zn_coll)c,
                                        .bytes = 1024,
                                        .count = 256,
                                        .esize = 4,
                                        .nranks = 4,
                                        .registered = 1,
                                        .max_ch = 128,
                                        .chunk = 4096,
                                        .ll_chunk = 2048 };
            if (g[i]->supports(&call)) printf(" %s", zn_coll_name((enum zn_coll)c));
        }
        printf("\n");
    }
}

static void print_algos(void)
{
    int n;
    const struct zn_algo *const *a = zn_algo_list(&n);
    printf("Algorithms (ZINC_ALGO forces one; the cost model picks otherwise):\n");
    for (int i = 0; i < n; i++) printf("  %-12s %s\n", a[i]->name, a[i]->doc);
    print_gpu_algos();
}

static void print_topology(void)
{
    char host[256] = "?";
    gethostname(host, sizeof(host) - 1);
    printf("Host: %s, host id %016llx, %ld CPUs online\n", host, (unsigned long long)zn_host_hash(),
           sysconf(_SC_NPROCESSORS_ONLN));
    union zn_sockaddr a;
    char ifname[64], addr[ZN_SOCKADDR_STRLEN];
    if (zn_sock_local_addr(&a, ifname, sizeof(ifname)) == 0) {
        zn_sockaddr_str(&a, addr, sizeof(addr));
        char *port = strrchr(addr, ':');
        if (port) *port = 0; /* the interface's address; ports are picked per socket */
        printf("Network: interface %s, address %s (ZINC_SOCKET_IFNAME picks another)\n", ifname,
               addr);
    } else {
        printf("Network: no usable interface (check ZINC_SOCKET_IFNAME)\n");
    }
    struct statvfs vfs;
    if (statvfs("/dev/shm", &vfs) == 0)
        printf("Shared memory: /dev/shm %.1f GiB free\n",
               (double)vfs.f_bavail * (double)vfs.f_frsize / (1u << 30));
    printf("Transports: %s (ranks on one host), %s (between hosts over a net, or everywhere with "
           "ZINC_TRANSPORT=net; ZINC_TRANSPORT=socket: over the socket net)\n",
           zn_transport_shm.name, zn_transport_net.name);
}

static void print_cuda(void)
{
    static struct zi_cuda_facts f;
    zi_cuda_gather(&f, ZINC_INFO_CUDA_ARCHS);
    zi_cuda_print(stdout, &f);
}

/* The nets of the registry (plugin nets first) and their devices, then the nets it does not
 * use and why (a built-in net without a device, a net whose init failed, one not built). */
static void print_nets(void)
{
    int n = zn_net_count();
    printf("Nets (ZINC_NET / NCCL_NET picks one by name; NCCL_NET_PLUGIN loads a plugin):\n");
    if (n == 0) printf("  none usable\n");
    for (int i = 0; i < n; i++) {
        const struct zn_net *net = zn_net_get(i);
        char from[32] = "built in";
        if (net->plugin_version)
            snprintf(from, sizeof(from), "plugin, ncclNetPlugin_v%d", net->plugin_version);
        printf("  %-10s %s, %d device(s)\n", net->name, from, net->ndev);
        for (int d = 0; d < net->ndev; d++) {
            ncclNetProperties_t p;
            if (net->ops->getProperties(d, &p) != ncclSuccess) continue;
            printf("    dev %d: %s, %d Mb/s, memory:%s%s%s, maxRecvs %d, PCI %s\n", d,
                   p.name ? p.name : "?", p.speed, p.ptrSupport & NCCL_PTR_HOST ? " host" : "",
                   p.ptrSupport & NCCL_PTR_CUDA ? " cuda" : "",
                   p.ptrSupport & NCCL_PTR_DMABUF ? " dmabuf" : "", p.maxRecvs,
                   p.pciPath ? p.pciPath : "unknown");
        }
    }
    for (int i = 0; i < zn_net_unused_count(); i++) {
        const struct zn_net_unused *u = zn_net_unused_get(i);
        printf("  %-10s %s, not used: %s\n", u->name, u->plugin_version ? "plugin" : "built in",
               u->why);
    }
}

/* Whether process pid catches signal sig (SigCgt of /proc/PID/status, a hex mask with bit
 * sig-1): 1 yes, 0 no, -1 unknown (no such process, or no /proc). */
static int catches_signal(long pid, int sig)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%ld/status", pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int found = -1;
    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, "SigCgt:", 7) != 0) continue;
        const char *p = line + 7;
        while (*p == ' ' || *p == '\t') p++;
        size_t len = strcspn(p, " \t\n");
        /* The mask's last hex digit holds signals 1-4, the one before it 5-8, and so on. */
        size_t digit = (size_t)(sig - 1) / 4;
        if (digit >= len) {
            found = 0;
            break;
        }
        char c = p[len - 1 - digit];
        int v = c >= '0' && c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
        found = (v >> ((sig - 1) % 4)) & 1;
        break;
    }
    fclose(f);
    return found;
}

/* Send process pid the state dump signal: the number ZINC_PROXY_DUMP_SIGNAL (or
 * NCCL_PROXY_DUMP_SIGNAL, or the config file) gives here, which must be what the process was
 * started with. The process prints the dump to its own log (stderr or ZINC_DEBUG_FILE). A
 * process that does not catch the signal (no zinc communicator or proxy, or started without
 * the parameter) is not signalled: the default action of the signal would kill it. */
static int dump_proxy(const char *pid_s)
{
    char *end = NULL;
    long pid = pid_s ? strtol(pid_s, &end, 10) : 0;
    if (!pid_s || *end || pid <= 0) {
        fprintf(stderr, "usage: zinc-info --dump PID\n");
        return 2;
    }
    int sig = (int)zn_params()->proxy_dump_signal;
    if (sig <= 0 || sig >= NSIG) {
        fprintf(stderr, "zinc-info: ZINC_PROXY_DUMP_SIGNAL is not set to a signal number (set it "
                        "here and in the process, e.g. 12 for SIGUSR2)\n");
        return 2;
    }
    int c = catches_signal(pid, sig);
    if (c < 0) {
        fprintf(stderr, "zinc-info: no process %ld (cannot read /proc/%ld/status)\n", pid, pid);
        return 1;
    }
    if (c == 0) {
        fprintf(stderr,
                "zinc-info: process %ld has no handler for signal %d (SigCgt in /proc/%ld/status): "
                "it holds no zinc communicator, or was not started with "
                "ZINC_PROXY_DUMP_SIGNAL=%d; not signalling it, since the signal would kill it\n",
                pid, sig, pid, sig);
        return 1;
    }
    if (kill((pid_t)pid, sig) != 0) {
        fprintf(stderr, "zinc-info: cannot signal process %ld: %s\n", pid, strerror(errno));
        return 1;
    }
    printf("sent signal %d to process %ld: its state (communicators, proxy) goes to its log\n", sig,
           pid);
    return 0;
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "all";
    if (!strcmp(what, "-h") || !strcmp(what, "--help")) {
        printf("usage: zinc-info [all|params|algos|topology|nets|cuda]\n"
               "       zinc-info --dump PID\n");
        return 0;
    }
    if (!strcmp(what, "--dump")) return dump_proxy(argc > 2 ? argv[2] : NULL);
    int all = !strcmp(what, "all");
    if (all)
        printf("zinc %s, NCCL API %d.%d.%d\n\n", zincGetVersionString(), NCCL_MAJOR, NCCL_MINOR,
               NCCL_PATCH);
    if (all || !strcmp(what, "topology")) {
        print_topology();
        printf("\n");
    }
    if (all || !strcmp(what, "nets")) {
        print_nets();
        printf("\n");
    }
    if (all || !strcmp(what, "cuda")) {
        print_cuda();
        printf("\n");
    }
    if (all || !strcmp(what, "algos")) {
        print_algos();
        printf("\n");
    }
    if (all || !strcmp(what, "params")) print_params();
    return 0;
}
