/*
 * zinc-info's CUDA section printed for made-up machines (no GPU needed): the one line that
 * says why there is no GPU to use, each GPU's facts, the peer matrix and the path a
 * communicator would take. Also the real query on this machine, which must say something
 * consistent with what the build has.
 */
#include "zinc-info-cuda.h"
#include "zt.h"

#include <stdlib.h>

static char *print(const struct zi_cuda_facts *f)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    if (!out) return NULL;
    zi_cuda_print(out, f);
    fclose(out);
    return buf;
}

static int has(const char *text, const char *want)
{
    if (!text || !strstr(text, want)) {
        fprintf(stderr, "expected \"%s\" in:\n%s\n", want, text ? text : "(null)");
        return 0;
    }
    return 1;
}

static int lines(const char *text)
{
    int n = 0;
    for (const char *p = text; p && *p; p++) n += *p == '\n';
    return n;
}

static void state(struct zi_cuda_facts *f, enum zn_cuda_state st, int drv, int rt)
{
    memset(f, 0, sizeof(*f));
    f->archs = "90";
    f->sys.state = st;
    f->sys.driver_version = drv;
    f->sys.runtime_version = rt;
}

/* n GPUs like H100s, every pair linked as given (access, atomics, rank). */
static void machine(struct zi_cuda_facts *f, int n, int access, int atomics, int rank)
{
    state(f, ZN_CUDA_OK, 13000, 12090);
    f->sys.ndev = n;
    f->ngpu = n < ZI_MAX_GPUS ? n : ZI_MAX_GPUS;
    for (int i = 0; i < f->ngpu; i++) {
        f->gpu_ok[i] = 1;
        struct zn_cuda_gpu *g = &f->gpu[i];
        snprintf(g->name, sizeof(g->name), "NVIDIA H100 80GB HBM3");
        snprintf(g->bus_id, sizeof(g->bus_id), "00000000:%02X:00.0", (unsigned)(0x18 + i) & 0xffu);
        g->mem_bytes = 85ull << 30;
        g->cc_major = 9;
        g->sm_count = 132;
        g->cumem_fd = g->legacy_ipc = 1;
        for (int j = 0; j < f->ngpu; j++)
            f->link[i][j] = (struct zn_cuda_link){ .access = i == j || access,
                                                   .atomics = i != j && atomics,
                                                   .perf_rank = i == j ? -1 : rank };
    }
}

ZT_TEST(one_line_without_gpu)
{
    struct zi_cuda_facts f;
    char *t;
    state(&f, ZN_CUDA_NOT_BUILT, 0, 0);
    t = print(&f);
    ZT_ASSERT(has(t, "CUDA: not in this build") && has(t, "host communicators only"));
    ZT_EQ_INT(lines(t), 1);
    free(t);
    state(&f, ZN_CUDA_NO_DRIVER, 0, 12090);
    t = print(&f);
    ZT_ASSERT(has(t, "runtime 12.9 built in, but no NVIDIA driver is loaded"));
    ZT_EQ_INT(lines(t), 1);
    free(t);
    state(&f, ZN_CUDA_OLD_DRIVER, 12020, 12090);
    t = print(&f);
    ZT_ASSERT(has(t, "the driver supports CUDA 12.2, older than this build's runtime 12.9"));
    ZT_EQ_INT(lines(t), 1);
    free(t);
    state(&f, ZN_CUDA_NO_DEVICE, 13000, 12090);
    f.visible = "";
    t = print(&f);
    ZT_ASSERT(has(t, "driver 13.0, runtime 12.9, but no GPU is visible to this process "
                     "(CUDA_VISIBLE_DEVICES=\"\")"));
    ZT_EQ_INT(lines(t), 1);
    free(t);
    state(&f, ZN_CUDA_ERROR, 13000, 12090);
    snprintf(f.sys.error, sizeof(f.sys.error), "system not yet initialized (CUDA error 802)");
    t = print(&f);
    ZT_ASSERT(has(t, "listing the GPUs failed: system not yet initialized (CUDA error 802)"));
    ZT_EQ_INT(lines(t), 1);
    free(t);
}

ZT_TEST(one_gpu)
{
    struct zi_cuda_facts f;
    machine(&f, 1, 0, 0, -1);
    char *t = print(&f);
    ZT_ASSERT(has(t, "CUDA: driver 13.0, runtime 12.9, 1 GPU; cuda communicators on it "
                     "(device code for 90)\n"));
    ZT_ASSERT(has(t, "  GPU 0: NVIDIA H100 80GB HBM3, 85.0 GiB, compute capability 9.0, 132 SMs, "
                     "PCI 00000000:18:00.0\n"));
    ZT_ASSERT(has(t, "cuMem POSIX-fd export: yes; legacy CUDA IPC: yes\n"));
    ZT_ASSERT(has(t, "Ranks sharing the GPU take the p2p path"));
    ZT_ASSERT(!strstr(t, "Peer access")); /* no pairs */
    free(t);
}

ZT_TEST(nvlink_pairs_direct)
{
    struct zi_cuda_facts f;
    machine(&f, 2, 1, 1, 0);
    char *t = print(&f);
    ZT_ASSERT(has(t, "2 GPUs; cuda communicators on them"));
    ZT_ASSERT(has(t, "    0    self   NV:0  \n"));
    ZT_ASSERT(has(t, "    1    NV:0   self  \n"));
    ZT_ASSERT(has(t, "A communicator over all 2 GPUs: direct kernels"));
    free(t);
}

ZT_TEST(pcie_ring_and_none)
{
    struct zi_cuda_facts f;
    /* 4 GPUs over PCIe where only 0-1, 1-2, 2-3, 3-0 reach each other: a ring 0 1 2 3. */
    machine(&f, 4, 1, 0, 1);
    for (int a = 0; a < 4; a++) f.link[a][(a + 2) % 4].access = 0;
    char *t = print(&f);
    ZT_ASSERT(has(t, "    0    self   P:1    -      P:1   \n"));
    ZT_ASSERT(has(t, "GPU ring 0 1 2 3 (not every pair reaches the other)"));
    free(t);
    /* No peer access at all: staged. */
    machine(&f, 3, 0, 0, -1);
    t = print(&f);
    ZT_ASSERT(has(t, "    2    -      -      self  \n"));
    ZT_ASSERT(has(t, "staged through host memory (no ring of GPUs reaches each other)"));
    free(t);
    /* More GPUs than the p2p path takes. */
    machine(&f, 10, 1, 1, 0);
    t = print(&f);
    ZT_ASSERT(has(t, "A communicator over all 10 GPUs: staged through host memory (more than 8"));
    free(t);
}

ZT_TEST(gpu_limits)
{
    struct zi_cuda_facts f;
    machine(&f, 2, 1, 1, 0);
    f.gpu[1].cumem_fd = 0;
    f.gpu[1].exclusive = 1;
    f.gpu[0].cc_major = 8; /* built for 90 only: an A100 cannot run it */
    f.gpu_ok[1] = 1;
    char *t = print(&f);
    ZT_ASSERT(has(t, "cannot run this build's device code (built for 90; rebuild with "
                     "-DZINC_CUDA_ARCHS=\"80\")"));
    ZT_ASSERT(has(t, "cuMem POSIX-fd export: no; legacy CUDA IPC: yes (processes share memory "
                     "through CUDA IPC)"));
    ZT_ASSERT(has(t, "at most one process uses it"));
    free(t);
    /* PTX of an older arch runs on a newer GPU; a -real cubin only on its major version. */
    machine(&f, 1, 0, 0, -1);
    f.archs = "80";
    t = print(&f);
    ZT_ASSERT(!strstr(t, "cannot run"));
    free(t);
    f.archs = "80-real";
    t = print(&f);
    ZT_ASSERT(has(t, "cannot run this build's device code (built for 80-real"));
    free(t);
    f.gpu_ok[0] = 0;
    snprintf(f.gpu_error[0], sizeof(f.gpu_error[0]), "out of memory");
    t = print(&f);
    ZT_ASSERT(has(t, "  GPU 0: cannot be queried: out of memory\n"));
    free(t);
}

/* This machine: a build without CUDA says so; one with CUDA says a state and, with GPUs, a
 * line per GPU. */
ZT_TEST(this_machine)
{
    static struct zi_cuda_facts f;
    zi_cuda_gather(&f, "90");
    char *t = print(&f);
    ZT_ASSERT(t && !strncmp(t, "CUDA: ", 6));
#if ZINC_HAVE_CUDA
    ZT_ASSERT(f.sys.state != ZN_CUDA_NOT_BUILT);
    ZT_ASSERT(f.sys.runtime_version > 0);
    if (f.sys.state == ZN_CUDA_OK) {
        ZT_ASSERT(f.ngpu >= 1 && has(t, "  GPU 0: "));
    } else {
        ZT_EQ_INT(lines(t), 1);
    }
#else
    ZT_EQ_INT(f.sys.state, ZN_CUDA_NOT_BUILT);
    ZT_EQ_INT(lines(t), 1);
#endif
    printf("%s", t);
    free(t);
}

ZT_MAIN(ZT_CASE(one_line_without_gpu), ZT_CASE(one_gpu), ZT_CASE(nvlink_pairs_direct),
        ZT_CASE(pcie_ring_and_none), ZT_CASE(gpu_limits), ZT_CASE(this_machine))
