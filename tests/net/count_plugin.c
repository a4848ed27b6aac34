/*
 * libnccl-net-count.so: a small external net plugin for the tests. It loads zinc's plugin
 * (libnccl-net-zinc.so, from its own directory), takes its ncclNetPlugin_v10 table and exports
 * one of its own that forwards every call and counts it. Exporting v10 (not v11) makes zinc's
 * loader go through its adapter for older plugins. zn_test_count_plugin_calls(slot) reports a
 * count. With ZN_TEST_COUNT_PLUGIN_FAIL_INIT set, init fails.
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

static const ncclNet_v10_t *inner;

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

static ncclResult_t c_init(ncclDebugLogger_t log, ncclProfilerCallback_t prof)
{
    atomic_fetch_add(&n_init, 1);
    if (getenv("ZN_TEST_COUNT_PLUGIN_FAIL_INIT")) { /* for net_plugin_init_fails */
        log(NCCL_LOG_INFO, NCCL_NET, __FILE__, __LINE__, "count plugin: asked to fail init");
        return ncclSystemError;
    }
    if (!inner) {
        Dl_info info;
        char path[4096];
        if (!dladdr((void *)c_init, &info) || !info.dli_fname) return ncclSystemError;
        snprintf(path, sizeof(path), "%s", info.dli_fname);
        char lib[4200];
        snprintf(lib, sizeof(lib), "%s/libnccl-net-zinc.so", dirname(path));
        void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
        inner = h ? dlsym(h, "ncclNetPlugin_v10") : NULL;
        if (!inner) {
            log(NCCL_LOG_WARN, NCCL_NET, __FILE__, __LINE__, "count plugin: cannot load %s: %s",
                lib, dlerror());
            return ncclSystemError;
        }
    }
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
