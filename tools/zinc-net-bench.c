/*
 * zinc-net-bench: bandwidth of one net connection between two processes on this host, through
 * the net registry (ZINC_NET picks the net, NCCL_NET_PLUGIN loads a plugin, ZINC_SOCKET_IFNAME
 * the interface: lo for loopback).
 *
 *   zinc-net-bench [-b BYTES] [-n ITERS] [-w WARMUP] [-d DEPTH]
 *
 * A forked child connects and sends ITERS messages of BYTES (DEPTH in flight); the parent
 * receives them and times from the first receive of the timed part to the last completion.
 * Prints one line: net, size, iterations and the rate in Gbit/s and GB/s.
 */
#include "net/net_layer.h"
#include "util/clock.h"
#include "util/err.h"
#include "util/param.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

static int run_requests(const ncclNet_t *ops, void *comm, int send, char *buf, size_t bytes,
                        int iters, int depth)
{
    void *reqs[NCCL_NET_MAX_REQUESTS] = { 0 };
    int posted = 0, done_n = 0;
    int64_t deadline = zn_deadline_from_now();
    while (done_n < iters) {
        for (int k = 0; k < depth; k++) {
            if (!reqs[k] && posted < iters) {
                int tag = 1;
                ncclResult_t r =
                    send ? ops->isend(comm, buf, bytes, tag, NULL, NULL, &reqs[k])
                         : ops->irecv(comm, 1, (void **)&buf, &bytes, &tag, NULL, NULL, &reqs[k]);
                if (r != ncclSuccess) return -1;
                if (reqs[k]) posted++;
            }
            int d = 0;
            if (reqs[k] && ops->test(reqs[k], &d, NULL) != ncclSuccess) return -1;
            if (d) reqs[k] = NULL, done_n++;
        }
        sched_yield(); /* the machine may be shared: spin politely, as a proxy thread would */
        if (zn_now_ns() > deadline) {
            fprintf(stderr, "zinc-net-bench: no completion within ZINC_TIMEOUT\n");
            return -1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    size_t bytes = 64u << 20;
    int iters = 20, warmup = 3, depth = 2, opt;
    while ((opt = getopt(argc, argv, "b:n:w:d:")) != -1) {
        int64_t v = 0;
        if (opt == 'b' && zn_param_parse_size(optarg, &v) == 0)
            bytes = (size_t)v;
        else if (opt == 'n')
            iters = atoi(optarg);
        else if (opt == 'w')
            warmup = atoi(optarg);
        else if (opt == 'd')
            depth = atoi(optarg);
        else {
            fprintf(stderr, "usage: zinc-net-bench [-b BYTES] [-n ITERS] [-w WARMUP] [-d DEPTH]\n");
            return 2;
        }
    }
    if (depth < 1 || depth > NCCL_NET_MAX_REQUESTS || iters < 1) return 2;
    const struct zn_net *net;
    if (zn_net_select(&net) != ncclSuccess) return 1;
    const ncclNet_t *ops = net->ops;
    char handle[NCCL_NET_HANDLE_MAXSIZE] = { 0 };
    void *lc = NULL, *comm = NULL;
    if (ops->listen(net->ctx, 0, handle, &lc) != ncclSuccess) return 1;
    char *buf = malloc(bytes ? bytes : 1);
    memset(buf, 0x5a, bytes);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        while (!comm)
            if (ops->connect(net->ctx, 0, handle, &comm, NULL) != ncclSuccess) _exit(1);
        int rc = run_requests(ops, comm, 1, buf, bytes, warmup + iters, depth);
        ops->closeSend(comm);
        _exit(rc == 0 ? 0 : 1);
    }
    while (!comm)
        if (ops->accept(lc, &comm, NULL) != ncclSuccess) return 1;
    if (warmup > 0 && run_requests(ops, comm, 0, buf, bytes, warmup, depth) != 0) return 1;
    int64_t t0 = zn_now_ns();
    if (run_requests(ops, comm, 0, buf, bytes, iters, depth) != 0) return 1;
    double s = (double)(zn_now_ns() - t0) * 1e-9;
    int st = 0;
    waitpid(pid, &st, 0);
    ops->closeRecv(comm);
    ops->closeListen(lc);
    double total = (double)bytes * iters;
    printf("net %s: %zu bytes x %d, depth %d: %.2f Gbit/s (%.3f GB/s)\n", net->name, bytes, iters,
           depth, total * 8 / s * 1e-9, total / s * 1e-9);
    free(buf);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}
