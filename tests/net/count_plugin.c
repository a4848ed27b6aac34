/*
 * libnccl-net-count.so: a small external net plugin for the tests. It loads zinc's plugin
 * (libnccl-net-zinc.so, from its own directory) and exports two tables of its own,
 * ncclNetPlugin_v12 and ncclNetPlugin_v10, each forwarding every call to zinc's table of the
 * same version and counting it. A loader takes v12 as it is; with ZINC_NET_PLUGIN_VERSION
 * below 12 it takes v10, through its adapter for older plugins. zn_test_count_plugin_calls(slot)
 * reports a count (the two tables share the counters; one of them is used per process). With
 * ZN_TEST_COUNT_PLUGIN_FAIL_INIT set, init fails.
 */
#define _GNU_SOURCE
#include "net/nccl_net.h"

#include <dlfcn.h>
#include <libgen.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

static const ncclNet_v10_t *inner;   /* zinc's v10 table, behind ncclNetPlugin_v10 */
static const ncclNet_v12_t *inner12; /* zinc's v12 table, behind ncclNetPlugin_v12 */

#define SLOTS(X) \
    X(init)      \
    X(listen)    \
    X(connect) X(accept) X(isend) X(irecv) X(test) X(closeSend) X(closeRecv) X(closeListen)
#define X(s) static atomic_long n_##s;
SLOTS(X)
#undef X

EXPORT long zn_test_count_plugin_calls(const char *slot)
{
#define X(s) \
    if (strcmp(slot, #s) == 0) return atomic_load(&n_##s);
    SLOTS(X)
#undef X
    return -1;
}

/* zinc's table SYM from libnccl-net-zinc.so beside this library; NULL (logged) if absent. */
static const void *load_inner(ncclDebugLogger_t log, const char *sym)
{
    Dl_info info;
    char path[4096];
    if (!dladdr((void *)load_inner, &info) || !info.dli_fname) return NULL;
    snprintf(path, sizeof(path), "%s", info.dli_fname);
    char lib[4200];
    snprintf(lib, sizeof(lib), "%s/libnccl-net-zinc.so", dirname(path));
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    const void *t = h ? dlsym(h, sym) : NULL;
    if (!t)
        log(NCCL_LOG_WARN, NCCL_NET, __FILE__, __LINE__, "count plugin: cannot load %s from %s: %s",
            sym, lib, dlerror());
    return t;
}

static int count_init(ncclDebugLogger_t log)
{
    atomic_fetch_add(&n_init, 1);
    if (getenv("ZN_TEST_COUNT_PLUGIN_FAIL_INIT")) { /* for net_plugin_init_fails */
        log(NCCL_LOG_INFO, NCCL_NET, __FILE__, __LINE__, "count plugin: asked to fail init");
        return 0;
    }
    return 1;
}

static ncclResult_t c_init(ncclDebugLogger_t log, ncclProfilerCallback_t prof)
{
    if (!count_init(log)) return ncclSystemError;
    if (!inner && !(inner = load_inner(log, "ncclNetPlugin_v10"))) return ncclSystemError;
    return inner->init(log, prof);
}
static ncclResult_t c_devices(int *n)
{
    return inner->devices(n);
}
static ncclResult_t c_props(int d, ncclNetProperties_v10_t *p)
{
    return inner->getProperties(d, p);
}
static ncclResult_t c_listen(int d, void *h, void **l)
{
    atomic_fetch_add(&n_listen, 1);
    return inner->listen(d, h, l);
}
static ncclResult_t c_connect(int d, ncclNetCommConfig_v10_t *c, void *h, void **s,
                              ncclNetDeviceHandle_v10_t **dc)
{
    atomic_fetch_add(&n_connect, 1);
    return inner->connect(d, c, h, s, dc);
}
static ncclResult_t c_accept(void *l, void **r, ncclNetDeviceHandle_v10_t **dc)
{
    atomic_fetch_add(&n_accept, 1);
    return inner->accept(l, r, dc);
}
static ncclResult_t c_reg(void *c, void *d, size_t s, int t, void **m)
{
    return inner->regMr(c, d, s, t, m);
}
static ncclResult_t c_dmabuf(void *c, void *d, size_t s, int t, uint64_t o, int fd, void **m)
{
    return inner->regMrDmaBuf(c, d, s, t, o, fd, m);
}
static ncclResult_t c_dereg(void *c, void *m)
{
    return inner->deregMr(c, m);
}
static ncclResult_t c_isend(void *c, void *d, size_t s, int t, void *m, void *p, void **r)
{
    atomic_fetch_add(&n_isend, 1);
    return inner->isend(c, d, s, t, m, p, r);
}
static ncclResult_t c_irecv(void *c, int n, void **d, size_t *s, int *t, void **m, void **p,
                            void **r)
{
    atomic_fetch_add(&n_irecv, 1);
    return inner->irecv(c, n, d, s, t, m, p, r);
}
static ncclResult_t c_iflush(void *c, int n, void **d, int *s, void **m, void **r)
{
    return inner->iflush(c, n, d, s, m, r);
}
static ncclResult_t c_test(void *r, int *done, int *s)
{
    atomic_fetch_add(&n_test, 1);
    return inner->test(r, done, s);
}
static ncclResult_t c_close_send(void *c)
{
    atomic_fetch_add(&n_closeSend, 1);
    return inner->closeSend(c);
}
static ncclResult_t c_close_recv(void *c)
{
    atomic_fetch_add(&n_closeRecv, 1);
    return inner->closeRecv(c);
}
static ncclResult_t c_close_listen(void *c)
{
    atomic_fetch_add(&n_closeListen, 1);
    return inner->closeListen(c);
}
static ncclResult_t c_dev_mr(void *c, void *m, void **d)
{
    return inner->getDeviceMr(c, m, d);
}
static ncclResult_t c_consumed(void *c, int n, void *r)
{
    return inner->irecvConsumed(c, n, r);
}
static ncclResult_t c_vdev(int *d, ncclNetVDeviceProps_v10_t *p)
{
    return inner->makeVDevice(d, p);
}

/* ncclNetPlugin_v12: the same counts over zinc's v12 table (contexts per communicator). */
static ncclResult_t d_init(void **ctx, uint64_t id, ncclNetCommConfig_v12_t *cfg,
                           ncclDebugLogger_t log, ncclProfilerCallback_t prof)
{
    if (!count_init(log)) return ncclSystemError;
    if (!inner12 && !(inner12 = load_inner(log, "ncclNetPlugin_v12"))) return ncclSystemError;
    return inner12->init(ctx, id, cfg, log, prof);
}
static ncclResult_t d_devices(int *n)
{
    return inner12->devices(n);
}
static ncclResult_t d_props(int d, ncclNetProperties_v12_t *p)
{
    return inner12->getProperties(d, p);
}
static ncclResult_t d_listen(void *ctx, int d, void *h, void **l)
{
    atomic_fetch_add(&n_listen, 1);
    return inner12->listen(ctx, d, h, l);
}
static ncclResult_t d_connect(void *ctx, int d, void *h, void **s, ncclNetDeviceHandle_v12_t **dc)
{
    atomic_fetch_add(&n_connect, 1);
    return inner12->connect(ctx, d, h, s, dc);
}
static ncclResult_t d_accept(void *l, void **r, ncclNetDeviceHandle_v12_t **dc)
{
    atomic_fetch_add(&n_accept, 1);
    return inner12->accept(l, r, dc);
}
static ncclResult_t d_reg(void *c, void *d, size_t s, int t, void **m)
{
    return inner12->regMr(c, d, s, t, m);
}
static ncclResult_t d_dmabuf(void *c, void *d, size_t s, int t, uint64_t o, int fd, void **m)
{
    return inner12->regMrDmaBuf(c, d, s, t, o, fd, m);
}
static ncclResult_t d_dereg(void *c, void *m)
{
    return inner12->deregMr(c, m);
}
static ncclResult_t d_isend(void *c, void *d, size_t s, int t, void *m, void *p, void **r)
{
    atomic_fetch_add(&n_isend, 1);
    return inner12->isend(c, d, s, t, m, p, r);
}
static ncclResult_t d_irecv(void *c, int n, void **d, size_t *s, int *t, void **m, void **p,
                            void **r)
{
    atomic_fetch_add(&n_irecv, 1);
    return inner12->irecv(c, n, d, s, t, m, p, r);
}
static ncclResult_t d_iflush(void *c, int n, void **d, int *s, void **m, void **r)
{
    return inner12->iflush(c, n, d, s, m, r);
}
static ncclResult_t d_test(void *r, int *done, int *s)
{
    atomic_fetch_add(&n_test, 1);
    return inner12->test(r, done, s);
}
static ncclResult_t d_close_send(void *c)
{
    atomic_fetch_add(&n_closeSend, 1);
    return inner12->closeSend(c);
}
static ncclResult_t d_close_recv(void *c)
{
    atomic_fetch_add(&n_closeRecv, 1);
    return inner12->closeRecv(c);
}
static ncclResult_t d_close_listen(void *c)
{
    atomic_fetch_add(&n_closeListen, 1);
    return inner12->closeListen(c);
}
static ncclResult_t d_dev_mr(void *c, void *m, void **d)
{
    return inner12->getDeviceMr(c, m, d);
}
static ncclResult_t d_consumed(void *c, int n, void *r)
{
    return inner12->irecvConsumed(c, n, r);
}
static ncclResult_t d_vdev(int *d, ncclNetVDeviceProps_v12_t *p)
{
    return inner12->makeVDevice(d, p);
}
static ncclResult_t d_finalize(void *ctx)
{
    return inner12->finalize(ctx);
}
static ncclResult_t d_set_attr(void *ctx, ncclNetAttr_v12_t *a)
{
    return inner12->setNetAttr(ctx, a);
}

EXPORT const ncclNet_v12_t ncclNetPlugin_v12 = {
    .name = "Counting",
    .init = d_init,
    .devices = d_devices,
    .getProperties = d_props,
    .listen = d_listen,
    .connect = d_connect,
    .accept = d_accept,
    .regMr = d_reg,
    .regMrDmaBuf = d_dmabuf,
    .deregMr = d_dereg,
    .isend = d_isend,
    .irecv = d_irecv,
    .iflush = d_iflush,
    .test = d_test,
    .closeSend = d_close_send,
    .closeRecv = d_close_recv,
    .closeListen = d_close_listen,
    .getDeviceMr = d_dev_mr,
    .irecvConsumed = d_consumed,
    .makeVDevice = d_vdev,
    .finalize = d_finalize,
    .setNetAttr = d_set_attr,
};

EXPORT const ncclNet_v10_t ncclNetPlugin_v10 = {
    .name = "Counting",
    .init = c_init,
    .devices = c_devices,
    .getProperties = c_props,
    .listen = c_listen,
    .connect = c_connect,
    .accept = c_accept,
    .regMr = c_reg,
    .regMrDmaBuf = c_dmabuf,
    .deregMr = c_dereg,
    .isend = c_isend,
    .irecv = c_irecv,
    .iflush = c_iflush,
    .test = c_test,
    .closeSend = c_close_send,
    .closeRecv = c_close_recv,
    .closeListen = c_close_listen,
    .getDeviceMr = c_dev_mr,
    .irecvConsumed = c_consumed,
    .makeVDevice = c_vdev,
};
