/*
 * zinc-info's CUDA section (see zinc-info-cuda.h). Without a usable GPU it prints one line that
 * says why: no CUDA in the build, no driver, a driver older than the runtime, no device.
 */
#include "zinc-info-cuda.h"

#include "topo/reach.h"
#include "transport/gpu_peer.h"

#include <stdlib.h>
#include <string.h>

void zi_cuda_gather(struct zi_cuda_facts *f, const char *archs)
{
    memset(f, 0, sizeof(*f));
    f->archs = archs ? archs : "";
    f->visible = getenv("CUDA_VISIBLE_DEVICES");
    zn_cuda_query_system(&f->sys);
    if (f->sys.state != ZN_CUDA_OK) return;
    f->ngpu = f->sys.ndev < ZI_MAX_GPUS ? f->sys.ndev : ZI_MAX_GPUS;
    for (int i = 0; i < f->ngpu; i++) {
        f->gpu_ok[i] = zn_cuda_query_gpu(i, &f->gpu[i]) == ncclSuccess;
        if (!f->gpu_ok[i])
            snprintf(f->gpu_error[i], sizeof(f->gpu_error[i]), "%s", zn_cuda_last_error_string());
    }
    for (int a = 0; a < f->ngpu; a++)
        for (int b = 0; b < f->ngpu; b++) zn_cuda_query_link(a, b, &f->link[a][b]);
}

/* "12.4" from 12040. */
static const char *version(int v, char *buf, size_t len)
{
    snprintf(buf, len, "%d.%d", v / 1000, (v % 1000) / 10);
    return buf;
}

/* Whether device code built for archs ("90", "80;90-real", ...) runs on compute capability cc
 * (major * 10 + minor): a cubin runs on its major version from its minor up, PTX (every arch
 * not marked -real) is compiled for any later GPU when loaded. Unknown or empty archs: yes. */
static int archs_run_on(const char *archs, int cc)
{
    int any = 0;
    for (const char *p = archs; *p;) {
        char *end;
        long a = strtol(p, &end, 10);
        size_t item = strcspn(p, ";");
        if (end != p && a > 0) {
            any = 1;
            int real_only = item >= 5 && !strncmp(p + item - 5, "-real", 5);
            if (a / 10 == cc / 10 && a <= cc) return 1;
            if (!real_only && a <= cc) return 1;
        }
        p += item;
        if (*p == ';') p++;
    }
    return !any;
}

/* One line when there is no GPU to use, saying why; 0 when there are GPUs to describe. */
static int print_state(FILE *out, const struct zi_cuda_facts *f)
{
    const struct zn_cuda_system *s = &f->sys;
    char drv[16], rt[16];
    version(s->driver_version, drv, sizeof(drv));
    version(s->runtime_version, rt, sizeof(rt));
    switch (s->state) {
    case ZN_CUDA_NOT_BUILT:
        fprintf(out, "CUDA: not in this build (built without CUDA: nvcc not found or "
                     "-DZINC_ENABLE_CUDA=OFF); host communicators only\n");
        return 1;
    case ZN_CUDA_NO_DRIVER:
        fprintf(out,
                "CUDA: runtime %s built in, but no NVIDIA driver is loaded; host "
                "communicators only\n",
                rt);
        return 1;
    case ZN_CUDA_OLD_DRIVER:
        fprintf(out,
                "CUDA: the driver supports CUDA %s, older than this build's runtime %s "
                "(update the driver); host communicators only\n",
                drv, rt);
        return 1;
    case ZN_CUDA_NO_DEVICE:
        fprintf(out,
                "CUDA: driver %s, runtime %s, but no GPU is visible to this process%s%s%s; "
                "host communicators only\n",
                drv, rt, f->visible ? " (CUDA_VISIBLE_DEVICES=\"" : "",
                f->visible ? f->visible : "", f->visible ? "\")" : "");
        return 1;
    case ZN_CUDA_ERROR:
        fprintf(out,
                "CUDA: driver %s, runtime %s, but listing the GPUs failed: %s; host "
                "communicators only\n",
                drv, rt, s->error);
        return 1;
    case ZN_CUDA_OK: break;
    }
    fprintf(out, "CUDA: driver %s, runtime %s, %d GPU%s; cuda communicators on %s", drv, rt,
            s->ndev, s->ndev == 1 ? "" : "s", s->ndev == 1 ? "it" : "them");
    if (*f->archs) fprintf(out, " (device code for %s)", f->archs);
    fprintf(out, "\n");
    if (s->ndev > f->ngpu) fprintf(out, "  (the first %d GPUs are described)\n", f->ngpu);
    return 0;
}

static void print_gpu(FILE *out, const struct zi_cuda_facts *f, int i)
{
    const struct zn_cuda_gpu *g = &f->gpu[i];
    if (!f->gpu_ok[i]) {
        fprintf(out, "  GPU %d: cannot be queried: %s\n", i, f->gpu_error[i]);
        return;
    }
    fprintf(out, "  GPU %d: %s, %.1f GiB, compute capability %d.%d, %d SMs, PCI %s\n", i, g->name,
            (double)g->mem_bytes / (1024.0 * 1024 * 1024), g->cc_major, g->cc_minor, g->sm_count,
            g->bus_id);
    fprintf(out, "         cuMem POSIX-fd export: %s; legacy CUDA IPC: %s%s\n",
            g->cumem_fd ? "yes" : "no", g->legacy_ipc ? "yes" : "no",
            !g->cumem_fd && g->legacy_ipc ? " (processes share memory through CUDA IPC)"
            : !g->cumem_fd                ? " (processes cannot share its memory: staged)"
                                          : "");
    if (g->exclusive)
        fprintf(out,
                "         compute mode exclusive or prohibited: at most one process uses it\n");
    if (!archs_run_on(f->archs, g->cc_major * 10 + g->cc_minor))
        fprintf(out,
                "         cannot run this build's device code (built for %s; rebuild with "
                "-DZINC_CUDA_ARCHS=\"%d%d\")\n",
                f->archs, g->cc_major, g->cc_minor);
}

static void print_links(FILE *out, const struct zi_cuda_facts *f)
{
    int n = f->ngpu;
    fprintf(out, "  Peer access, row GPU to column GPU (NV: native atomics over the link, as "
                 "NVLink has; P: peer access without them, as over PCIe; -: none; :N the "
                 "runtime's performance rank, lower is faster):\n");
    fprintf(out, "        ");
    for (int b = 0; b < n; b++) fprintf(out, " %-6d", b);
    fprintf(out, "\n");
    for (int a = 0; a < n; a++) {
        fprintf(out, "    %-4d", a);
        for (int b = 0; b < n; b++) {
            const struct zn_cuda_link *l = &f->link[a][b];
            char cell[16];
            if (a == b)
                snprintf(cell, sizeof(cell), "self");
            else if (!l->access)
                snprintf(cell, sizeof(cell), "-");
            else if (l->perf_rank >= 0)
                snprintf(cell, sizeof(cell), "%s:%d", l->atomics ? "NV" : "P", l->perf_rank);
            else
                snprintf(cell, sizeof(cell), "%s", l->atomics ? "NV" : "P");
            fprintf(out, " %-6s", cell);
        }
        fprintf(out, "\n");
    }
}

/* The path a communicator with one rank per GPU, over all of them, would take (as
 * api/setup.c decides it from the same reachability, topo/reach.h). */
static void print_path(FILE *out, const struct zi_cuda_facts *f)
{
    int n = f->sys.ndev;
    if (n == 1) {
        fprintf(out, "  Ranks sharing the GPU take the p2p path: side by side in one process "
                     "(few enough channels, e.g. ZINC_GPU_CHANNELS=16), time-sliced across "
                     "processes\n");
        return;
    }
    if (n > ZN_P2P_MAX_RANKS) {
        fprintf(out,
                "  A communicator over all %d GPUs: staged through host memory (more than %d "
                "GPUs)\n",
                n, ZN_P2P_MAX_RANKS);
        return;
    }
    uint8_t reach[ZN_P2P_MAX_RANKS * ZN_P2P_MAX_RANKS];
    int order[ZN_P2P_MAX_RANKS];
    for (int a = 0; a < n; a++)
        for (int b = 0; b < n; b++) reach[a * n + b] = a == b || f->link[a][b].access;
    if (zn_topo_reach_full(reach, n)) {
        fprintf(out,
                "  A communicator over all %d GPUs: direct kernels (every pair reaches the "
                "other)\n",
                n);
    } else if (zn_topo_gpu_ring(reach, n, order)) {
        fprintf(out, "  A communicator over all %d GPUs: GPU ring", n);
        for (int p = 0; p < n; p++) fprintf(out, " %d", order[p]);
        fprintf(out, " (not every pair reaches the other); alltoall, gather, scatter and "
                     "send/recv staged through host memory\n");
    } else {
        fprintf(out,
                "  A communicator over all %d GPUs: staged through host memory (no ring "
                "of GPUs reaches each other)\n",
                n);
    }
}

void zi_cuda_print(FILE *out, const struct zi_cuda_facts *f)
{
    if (print_state(out, f)) return;
    for (int i = 0; i < f->ngpu; i++) print_gpu(out, f, i);
    if (f->ngpu > 1) print_links(out, f);
    print_path(out, f);
}
