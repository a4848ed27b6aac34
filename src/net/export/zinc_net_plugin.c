/*
 * libnccl-net-zinc.so: zinc's nets exported with NCCL's plugin ABI, so that NCCL (or zinc, or
 * any other loader of libnccl-net-*.so) can use them: NCCL_NET_PLUGIN=zinc.
 *
 * A loader takes ONE table per plugin library (the newest ncclNetPlugin_vN it knows), so the
 * exported tables are a front for one of zinc's nets, chosen once when the library is loaded:
 * the net named by ZINC_NET / NCCL_NET if it is "IB" or "Socket", else the IB verbs net when
 * it has a usable port, else the socket net. The tables' `name` is the chosen net's name
 * ("IB" or "Socket"), which is what NCCL matches NCCL_NET against and prints ("Initialized
 * NET plugin IB"). The choice is made at load time rather than at init because NCCL's own
 * adapters for v6..v11 tables copy `name` when they load the plugin; NCCL 2.30 uses a v12
 * table as it is and reads it later. A forced IB without a usable port fails init with the
 * reason, so that the loader falls back to its other nets.
 *
 * Only the ncclNetPlugin_vN tables are exported (a version script hides everything else, the
 * NCCL API included, so that loading this into real NCCL cannot shadow NCCL's own symbols).
 * v12 is the chosen net's own table behind thin forwarders; v11 keeps the contexts and converts
 * the properties and vProps (v12 moved them); v6..v10 are down-adapters, which keep one context
 * for the process because those versions have none. The rail and plane ids of v12 are the
 * net's own (NCCL_NET_ID_UNDEF unless ZINC_IB_HCA names them for an IB port); older tables
 * cannot carry them.
 *
 * This file is not part of libnccl.so (CMakeLists.txt builds it into the plugin only).
 */
#include "net/net_layer.h"
#include "util/err.h"
#include "util/log.h"
#include "util/param.h"

#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define ZN_EXPORT __attribute__((visibility("default")))

static const ncclNet_t *net = &zn_net_socket; /* the chosen net (choose_net, at load) */
static void *gctx;         /* the context of v6..v10 callers, created by their init */
static char unusable[256]; /* set when IB was forced and has no usable port: why */

/* A forced IB net without a usable port: init fails, naming why. */
static ncclResult_t check_usable(void)
{
    if (!unusable[0]) return ncclSuccess;
    return zn_error(ncclSystemError, ZN_NET,
                    "zinc net plugin: net IB (forced by ZINC_NET/NCCL_NET) "
                    "is not usable: %s",
                    unusable);
}

static ncclResult_t export_init_v10(ncclDebugLogger_t log, ncclProfilerCallback_t prof)
{
    if (gctx) return ncclSuccess;
    ZN_CHECK(check_usable());
    return net->init(&gctx, 0, NULL, log, prof);
}
static ncclResult_t export_init(ncclDebugLogger_t log)
{
    return export_init_v10(log, NULL);
}

/* The chosen net's properties as v11 has them: the same members, before v12 moved everything
 * after vProps and added the rail and plane. Every older version's are a subset. */
static ncclResult_t props_v11(int dev, ncclNetProperties_v11_t *out)
{
    ncclNetProperties_t p;
    ZN_CHECK(net->getProperties(dev, &p));
    if (zn_net_props_v12_to_v11(&p, out) != 0)
        return zn_error(ncclInternalError, ZN_NET,
                        "zinc net plugin: device %d merges %d NICs; tables before v12 hold %d", dev,
                        p.vProps.ndevs, NCCL_NET_MAX_DEVS_PER_NIC_V11);
    return ncclSuccess;
}
static ncclResult_t export_props_v9(int dev, ncclNetProperties_v9_t *out)
{
    ncclNetProperties_v11_t p;
    ZN_CHECK(props_v11(dev, &p));
    memcpy(out, &p, sizeof(*out)); /* v9/v10 are v11 without maxMultiRequestSize */
    return ncclSuccess;
}
static ncclResult_t export_props_v8(int dev, ncclNetProperties_v8_t *out)
{
    ncclNetProperties_t p;
    ZN_CHECK(net->getProperties(dev, &p));
    *out =
        (ncclNetProperties_v8_t){ p.name,        p.pciPath,  p.guid,          p.ptrSupport,
                                  p.regIsGlobal, p.speed,    p.port,          p.latency,
                                  p.maxComms,    p.maxRecvs, p.netDeviceType, p.netDeviceVersion };
    return ncclSuccess;
}
static ncclResult_t export_props_v7(int dev, ncclNetProperties_v7_t *out)
{
    ncclNetProperties_t p;
    ZN_CHECK(net->getProperties(dev, &p));
    *out = (ncclNetProperties_v7_t){ p.name,          p.pciPath,         p.guid,
                                     p.ptrSupport,    p.speed,           p.port,
                                     p.latency,       p.maxComms,        p.maxRecvs,
                                     p.netDeviceType, p.netDeviceVersion };
    return ncclSuccess;
}
static ncclResult_t export_props_v6(int dev, ncclNetProperties_v6_t *out)
{
    ncclNetProperties_t p;
    ZN_CHECK(net->getProperties(dev, &p));
    *out = (ncclNetProperties_v6_t){ p.name, p.pciPath, p.guid,     p.ptrSupport, p.speed,
                                     p.port, p.latency, p.maxComms, p.maxRecvs };
    return ncclSuccess;
}

static ncclResult_t export_listen(int dev, void *handle, void **l)
{
    return net->listen(gctx, dev, handle, l);
}
static ncclResult_t export_connect_v10(int dev, ncclNetCommConfig_v10_t *cfg, void *handle,
                                       void **s, ncclNetDeviceHandle_v10_t **dc)
{
    return net->connect(gctx, dev, handle, s, dc);
}
static ncclResult_t export_connect_v7(int dev, void *handle, void **s,
                                      ncclNetDeviceHandle_v7_t **dc)
{
    return net->connect(gctx, dev, handle, s, dc);
}
static ncclResult_t export_connect_v6(int dev, void *handle, void **s)
{
    return net->connect(gctx, dev, handle, s, NULL);
}
static ncclResult_t export_accept_v6(void *l, void **r)
{
    return net->accept(l, r, NULL);
}
static ncclResult_t export_reg_mr_int(void *comm, void *data, int size, int type, void **mh)
{
    return net->regMr(comm, data, (size_t)(size < 0 ? 0 : size), type, mh);
}
static ncclResult_t export_isend_v9(void *comm, void *data, size_t size, int tag, void *mh,
                                    void **req)
{
    return net->isend(comm, data, size, tag, mh, NULL, req);
}
static ncclResult_t export_isend_int(void *comm, void *data, int size, int tag, void *mh,
                                     void **req)
{
    return net->isend(comm, data, (size_t)(size < 0 ? 0 : size), tag, mh, NULL, req);
}
static ncclResult_t export_irecv_v9(void *comm, int n, void **data, size_t *sizes, int *tags,
                                    void **mh, void **req)
{
    return net->irecv(comm, n, data, sizes, tags, mh, NULL, req);
}
static ncclResult_t export_irecv_int(void *comm, int n, void **data, int *sizes, int *tags,
                                     void **mh, void **req)
{
    size_t s[NCCL_NET_MAX_REQUESTS];
    if (n < 0 || n > NCCL_NET_MAX_REQUESTS)
        return zn_error(ncclInvalidArgument, ZN_NET, "zinc net plugin: irecv of %d buffers", n);
    for (int i = 0; i < n; i++) s[i] = (size_t)(sizes[i] < 0 ? 0 : sizes[i]);
    return net->irecv(comm, n, data, s, tags, mh, NULL, req);
}
/* v9..v11 callers pass the 4-device vProps; zinc's nets take v12's. */
static ncclResult_t export_make_vdevice(int *d, ncclNetVDeviceProps_v9_t *props)
{
    if (props->ndevs < 0 || props->ndevs > NCCL_NET_MAX_DEVS_PER_NIC_V11)
        return zn_error(ncclInvalidArgument, ZN_NET, "zinc net plugin: makeVDevice of %d devices",
                        props->ndevs);
    ncclNetVDeviceProps_t v = { .ndevs = props->ndevs };
    memcpy(v.devs, props->devs, (size_t)props->ndevs * sizeof(v.devs[0]));
    return net->makeVDevice(d, &v);
}

static ncclResult_t export_dmabuf(void *c, void *d, size_t s, int t, uint64_t o, int fd, void **mh)
{
    return net->regMrDmaBuf(c, d, s, t, o, fd, mh);
}
static ncclResult_t export_dereg(void *c, void *mh)
{
    return net->deregMr(c, mh);
}
static ncclResult_t export_iflush(void *c, int n, void **d, int *s, void **mh, void **r)
{
    return net->iflush(c, n, d, s, mh, r);
}
static ncclResult_t export_test(void *r, int *done, int *sizes)
{
    return net->test(r, done, sizes);
}
static ncclResult_t export_close_send(void *c)
{
    return net->closeSend(c);
}
static ncclResult_t export_close_recv(void *c)
{
    return net->closeRecv(c);
}
static ncclResult_t export_close_listen(void *c)
{
    return net->closeListen(c);
}
static ncclResult_t export_get_device_mr(void *c, void *mh, void **d)
{
    return net->getDeviceMr(c, mh, d);
}
static ncclResult_t export_irecv_consumed(void *c, int n, void *r)
{
    return net->irecvConsumed(c, n, r);
}
static ncclResult_t export_accept(void *l, void **r, ncclNetDeviceHandle_v7_t **dc)
{
    return net->accept(l, r, dc);
}
static ncclResult_t export_reg_mr(void *comm, void *data, size_t size, int type, void **mh)
{
    return net->regMr(comm, data, size, type, mh);
}
static ncclResult_t export_isend(void *comm, void *data, size_t size, int tag, void *mh, void *ph,
                                 void **req)
{
    return net->isend(comm, data, size, tag, mh, ph, req);
}
static ncclResult_t export_irecv(void *comm, int n, void **data, size_t *sizes, int *tags,
                                 void **mh, void **ph, void **req)
{
    return net->irecv(comm, n, data, sizes, tags, mh, ph, req);
}
static ncclResult_t export_devices(int *ndev)
{
    return net->devices(ndev);
}

/* v11 and v12: per-communicator contexts, as zinc's nets have them. */
static ncclResult_t e12_init(void **ctx, uint64_t id, ncclNetCommConfig_v12_t *cfg,
                             ncclDebugLogger_t log, ncclProfilerCallback_t prof)
{
    ZN_CHECK(check_usable());
    return net->init(ctx, id, cfg, log, prof);
}
static ncclResult_t e12_props(int dev, ncclNetProperties_v12_t *p)
{
    return net->getProperties(dev, p);
}
static ncclResult_t e12_listen(void *ctx, int dev, void *h, void **l)
{
    return net->listen(ctx, dev, h, l);
}
static ncclResult_t e12_connect(void *ctx, int dev, void *h, void **s,
                                ncclNetDeviceHandle_v12_t **dc)
{
    return net->connect(ctx, dev, h, s, dc);
}
static ncclResult_t e12_make_vdevice(int *d, ncclNetVDeviceProps_v12_t *props)
{
    return net->makeVDevice(d, props);
}
static ncclResult_t e12_finalize(void *ctx)
{
    return net->finalize(ctx);
}
static ncclResult_t e12_set_attr(void *ctx, ncclNetAttr_v12_t *a)
{
    return net->setNetAttr(ctx, a);
}

/* Slots with one signature in every version. */
#define ZN_SAME_SLOTS                                                                    \
    .name = "Socket", /* until choose_net */ .devices = export_devices,                  \
    .regMrDmaBuf = export_dmabuf, .deregMr = export_dereg, .iflush = export_iflush,      \
    .test = export_test, .closeSend = export_close_send, .closeRecv = export_close_recv, \
    .closeListen = export_close_listen

ZN_EXPORT ncclNet_v12_t ncclNetPlugin_v12 = {
    ZN_SAME_SLOTS,
    .init = e12_init,
    .getProperties = e12_props,
    .listen = e12_listen,
    .connect = e12_connect,
    .accept = export_accept,
    .regMr = export_reg_mr,
    .isend = export_isend,
    .irecv = export_irecv,
    .getDeviceMr = export_get_device_mr,
    .irecvConsumed = export_irecv_consumed,
    .makeVDevice = e12_make_vdevice,
    .finalize = e12_finalize,
    .setNetAttr = e12_set_attr,
};

ZN_EXPORT ncclNet_v11_t ncclNetPlugin_v11 = {
    ZN_SAME_SLOTS,
    .init = e12_init,
    .getProperties = props_v11,
    .listen = e12_listen,
    .connect = e12_connect,
    .accept = export_accept,
    .regMr = export_reg_mr,
    .isend = export_isend,
    .irecv = export_irecv,
    .getDeviceMr = export_get_device_mr,
    .irecvConsumed = export_irecv_consumed,
    .makeVDevice = export_make_vdevice,
    .finalize = e12_finalize,
    .setNetAttr = e12_set_attr,
};

ZN_EXPORT ncclNet_v10_t ncclNetPlugin_v10 = {
    ZN_SAME_SLOTS,
    .init = export_init_v10,
    .getProperties = export_props_v9,
    .listen = export_listen,
    .connect = export_connect_v10,
    .accept = export_accept,
    .regMr = export_reg_mr,
    .isend = export_isend,
    .irecv = export_irecv,
    .getDeviceMr = export_get_device_mr,
    .irecvConsumed = export_irecv_consumed,
    .makeVDevice = export_make_vdevice,
};

ZN_EXPORT ncclNet_v9_t ncclNetPlugin_v9 = {
    ZN_SAME_SLOTS,
    .init = export_init,
    .getProperties = export_props_v9,
    .listen = export_listen,
    .connect = export_connect_v7,
    .accept = export_accept,
    .regMr = export_reg_mr,
    .isend = export_isend_v9,
    .irecv = export_irecv_v9,
    .getDeviceMr = export_get_device_mr,
    .irecvConsumed = export_irecv_consumed,
    .makeVDevice = export_make_vdevice,
};

ZN_EXPORT ncclNet_v8_t ncclNetPlugin_v8 = {
    ZN_SAME_SLOTS,
    .init = export_init,
    .getProperties = export_props_v8,
    .listen = export_listen,
    .connect = export_connect_v7,
    .accept = export_accept,
    .regMr = export_reg_mr,
    .isend = export_isend_int,
    .irecv = export_irecv_int,
    .getDeviceMr = export_get_device_mr,
    .irecvConsumed = export_irecv_consumed,
};

ZN_EXPORT ncclNet_v7_t ncclNetPlugin_v7 = {
    ZN_SAME_SLOTS,
    .init = export_init,
    .getProperties = export_props_v7,
    .listen = export_listen,
    .connect = export_connect_v7,
    .accept = export_accept,
    .regMr = export_reg_mr_int,
    .isend = export_isend_int,
    .irecv = export_irecv_int,
    .getDeviceMr = export_get_device_mr,
    .irecvConsumed = export_irecv_consumed,
};

ZN_EXPORT ncclNet_v6_t ncclNetPlugin_v6 = {
    ZN_SAME_SLOTS,
    .init = export_init,
    .getProperties = export_props_v6,
    .listen = export_listen,
    .connect = export_connect_v6,
    .accept = export_accept_v6,
    .regMr = export_reg_mr_int,
    .isend = export_isend_int,
    .irecv = export_irecv_int,
};

/* Pick the net behind the tables and give them its name (see the comment at the top). Says
 * once, at INFO level, which net is exported and, when IB is not, why. */
__attribute__((constructor)) static void choose_net(void)
{
    const char *want = zn_params()->net;
    const char *ib_why = NULL;
#if defined(ZINC_HAVE_IBVERBS) && ZINC_HAVE_IBVERBS
    int forced_ib = want && strcasecmp(want, zn_net_ib.name) == 0;
    int forced_socket = want && strcasecmp(want, zn_net_socket.name) == 0;
    if (forced_socket) {
        ib_why = "ZINC_NET/NCCL_NET names the socket net";
    } else if ((ib_why = zn_net_ib_why()) == NULL || forced_ib) {
        net = &zn_net_ib;
        if (ib_why) snprintf(unusable, sizeof(unusable), "%s", ib_why);
    }
#else
    (void)want;
    ib_why = "not built: rdma-core's headers were missing when this library was built";
#endif
    ncclNetPlugin_v12.name = ncclNetPlugin_v11.name = ncclNetPlugin_v10.name = net->name;
    ncclNetPlugin_v9.name = ncclNetPlugin_v8.name = ncclNetPlugin_v7.name = net->name;
    ncclNetPlugin_v6.name = net->name;
    if (net == &zn_net_socket)
        zn_info(ZN_NET | ZN_INIT, "zinc net plugin: exporting net Socket; IB not used: %s", ib_why);
    else
        zn_info(ZN_NET | ZN_INIT, "zinc net plugin: exporting net IB%s%s",
                ib_why ? "; not usable: " : "", ib_why ? ib_why : "");
}
