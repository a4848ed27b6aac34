/*
 * Loading of external net plugins (libnccl-net*.so) and the adapters that make an older
 * plugin table look like the newest one (ncclNet_t = v12), so that the rest of zinc sees one
 * interface.
 *
 * Which library: NCCL_NET_PLUGIN (or ZINC_NET_PLUGIN) = "none" loads nothing; a value with a
 * '/' is a path; another value NAME tries libnccl-net-NAME.so, then NAME itself; unset tries
 * libnccl-net.so, whose absence is normal and only noted at INFO. The newest exported
 * ncclNetPlugin_vN (v12 down to v6, or down from ZINC_NET_PLUGIN_VERSION) is used, as NCCL 2.30
 * does; a v12 table is used as it is. One plugin library per process, as in NCCL, which is why
 * the adapters keep the loaded table in file-level state.
 *
 * Every slot from name to closeListen has the same offset in every version (nccl_net.h), and
 * several have the same signature in all of them; the adapters forward those through the v6
 * view and convert only where versions differ. v11 differs from v12 only in its properties and
 * vProps; v6..v10 also lack contexts, which the adapter makes up.
 */
#include "net/net_layer.h"
#include "util/err.h"
#include "util/log.h"
#include "util/param.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int pver;         /* version of the loaded table (6..11 when adapted) */
static const void *ptab; /* the plugin's own table */
static int pinit_done;   /* v6..v10 init once per process; v11 contexts are per comm */
static ncclResult_t pinit_res;

#define P(v) ((const ncclNet_v##v##_t *)ptab)

/* The context the adapter hands out for v6..v10, which have none; v11's are the plugin's. */
struct adapt_ctx {
    ncclNetCommConfig_v10_t config;
};

static ncclResult_t adapt_init(void **ctx, uint64_t comm_id, ncclNetCommConfig_t *config,
                               ncclDebugLogger_t log, ncclProfilerCallback_t prof)
{
    if (pver == 11) return P(11)->init(ctx, comm_id, config, log, prof);
    if (!pinit_done) {
        pinit_res = pver == 10 ? P(10)->init(log, prof) : P(6)->init(log);
        pinit_done = 1;
    }
    if (pinit_res != ncclSuccess) return pinit_res;
    struct adapt_ctx *c;
    ZN_CHECK(zn_calloc(&c, 1, "net plugin adapter context"));
    c->config.trafficClass = config ? config->trafficClass : NCCL_NET_TRAFFIC_CLASS_UNDEF;
    *ctx = c;
    return ncclSuccess;
}

static ncclResult_t adapt_finalize(void *ctx)
{
    if (pver == 11) return P(11)->finalize(ctx);
    free(ctx);
    return ncclSuccess;
}

static ncclResult_t adapt_devices(int *ndev)
{
    return P(6)->devices(ndev);
}

/* Older properties are prefixes of v11's with a few members inserted (v8: regIsGlobal; v9:
 * forceFlush); members a version lacks get NCCL's defaults for it. v12 then moved everything
 * after vProps (8 devices instead of 4) and added the rail and plane, which an older plugin
 * cannot know: NCCL_NET_ID_UNDEF, as NCCL 2.30 sets them. */
static ncclResult_t adapt_get_properties(int dev, ncclNetProperties_t *out)
{
    ncclNetProperties_v11_t p = { .netDeviceType = NCCL_NET_DEVICE_HOST,
                                  .vProps = { .ndevs = 1, .devs = { dev } },
                                  .maxP2pBytes = NCCL_NET_MAX_SIZE_LEGACY,
                                  .maxCollBytes = NCCL_MAX_NET_SIZE_BYTES,
                                  .maxMultiRequestSize = 1 };
    if (pver == 11) {
        ZN_CHECK(P(11)->getProperties(dev, &p));
    } else if (pver >= 9) {
        ncclNetProperties_v9_t q;
        ZN_CHECK(P(9)->getProperties(dev, &q));
        memcpy(&p, &q, sizeof(q)); /* v9 and v10 are v11 without its last member */
        p.maxMultiRequestSize = 1;
    } else if (pver >= 7) {
        ncclNetProperties_v8_t q = { 0 };
        if (pver == 8) {
            ZN_CHECK(P(8)->getProperties(dev, &q));
        } else {
            ncclNetProperties_v7_t o;
            ZN_CHECK(P(7)->getProperties(dev, &o));
            q = (ncclNetProperties_v8_t){
                o.name,     o.pciPath,  o.guid,          o.ptrSupport,
                0,          o.speed,    o.port,          o.latency,
                o.maxComms, o.maxRecvs, o.netDeviceType, o.netDeviceVersion
            };
        }
        p.name = q.name, p.pciPath = q.pciPath, p.guid = q.guid, p.ptrSupport = q.ptrSupport;
        p.regIsGlobal = q.regIsGlobal, p.speed = q.speed, p.port = q.port, p.latency = q.latency;
        p.maxComms = q.maxComms, p.maxRecvs = q.maxRecvs, p.netDeviceType = q.netDeviceType;
        p.netDeviceVersion = q.netDeviceVersion;
    } else {
        ncclNetProperties_v6_t o;
        ZN_CHECK(P(6)->getProperties(dev, &o));
        p.name = o.name, p.pciPath = o.pciPath, p.guid = o.guid, p.ptrSupport = o.ptrSupport;
        p.speed = o.speed, p.port = o.port, p.latency = o.latency, p.maxComms = o.maxComms;
        p.maxRecvs = o.maxRecvs;
    }
    if (zn_net_props_v11_to_v12(&p, out) != 0)
        return zn_error(ncclInternalError, ZN_NET,
                        "net plugin %s (v%d): getProperties(%d) reports %d devices in vProps "
                        "(at most %d)",
                        P(6)->name, pver, dev, p.vProps.ndevs, NCCL_NET_MAX_DEVS_PER_NIC_V11);
    return ncclSuccess;
}

static ncclResult_t adapt_listen(void *ctx, int dev, void *handle, void **listen_comm)
{
    if (pver == 11) return P(11)->listen(ctx, dev, handle, listen_comm);
    return P(6)->listen(dev, handle, listen_comm);
}

static ncclResult_t adapt_connect(void *ctx, int dev, void *handle, void **send_comm,
                                  ncclNetDeviceHandle_t **dev_comm)
{
    if (pver == 11) return P(11)->connect(ctx, dev, handle, send_comm, dev_comm);
    struct adapt_ctx *c = ctx;
    if (pver == 10) return P(10)->connect(dev, &c->config, handle, send_comm, dev_comm);
    if (pver >= 7) return P(7)->connect(dev, handle, send_comm, dev_comm);
    return P(6)->connect(dev, handle, send_comm);
}

static ncclResult_t adapt_accept(void *listen_comm, void **recv_comm,
                                 ncclNetDeviceHandle_t **dev_comm)
{
    if (pver >= 7) return P(7)->accept(listen_comm, recv_comm, dev_comm);
    return P(6)->accept(listen_comm, recv_comm);
}

static ncclResult_t too_big(const char *what, size_t size)
{
    return zn_error(ncclInvalidArgument, ZN_NET,
                    "net plugin %s (v%d): %s of %zu bytes exceeds its int size limit", P(6)->name,
                    pver, what, size);
}

static ncclResult_t adapt_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle)
{
    if (pver >= 8) return P(8)->regMr(comm, data, size, type, mhandle);
    if (size > INT_MAX) return too_big("regMr", size);
    return P(6)->regMr(comm, data, (int)size, type, mhandle);
}

static ncclResult_t adapt_reg_mr_dmabuf(void *comm, void *data, size_t size, int type,
                                        uint64_t offset, int fd, void **mhandle)
{
    return P(6)->regMrDmaBuf(comm, data, size, type, offset, fd, mhandle);
}

static ncclResult_t adapt_dereg_mr(void *comm, void *mhandle)
{
    return P(6)->deregMr(comm, mhandle);
}

static ncclResult_t adapt_isend(void *comm, void *data, size_t size, int tag, void *mhandle,
                                void *phandle, void **request)
{
    if (pver >= 10) return P(10)->isend(comm, data, size, tag, mhandle, phandle, request);
    if (pver == 9) return P(9)->isend(comm, data, size, tag, mhandle, request);
    if (size > INT_MAX) return too_big("isend", size);
    return P(6)->isend(comm, data, (int)size, tag, mhandle, request);
}

static ncclResult_t adapt_irecv(void *comm, int n, void **data, size_t *sizes, int *tags,
                                void **mhandles, void **phandles, void **request)
{
    if (pver >= 10) return P(10)->irecv(comm, n, data, sizes, tags, mhandles, phandles, request);
    if (pver == 9) return P(9)->irecv(comm, n, data, sizes, tags, mhandles, request);
    int isizes[NCCL_NET_MAX_REQUESTS];
    if (n < 0 || n > NCCL_NET_MAX_REQUESTS)
        return zn_error(ncclInvalidArgument, ZN_NET, "net plugin %s: irecv of %d buffers",
                        P(6)->name, n);
    for (int i = 0; i < n; i++) {
        if (sizes[i] > INT_MAX) return too_big("irecv", sizes[i]);
        isizes[i] = (int)sizes[i];
    }
    return P(6)->irecv(comm, n, data, isizes, tags, mhandles, request);
}

static ncclResult_t adapt_iflush(void *comm, int n, void **data, int *sizes, void **mhandles,
                                 void **request)
{
    return P(6)->iflush(comm, n, data, sizes, mhandles, request);
}

static ncclResult_t adapt_test(void *request, int *done, int *sizes)
{
    return P(6)->test(request, done, sizes);
}

static ncclResult_t adapt_close_send(void *comm)
{
    return P(6)->closeSend(comm);
}
static ncclResult_t adapt_close_recv(void *comm)
{
    return P(6)->closeRecv(comm);
}
static ncclResult_t adapt_close_listen(void *comm)
{
    return P(6)->closeListen(comm);
}

static ncclResult_t missing(const char *what)
{
    return zn_error(ncclInvalidUsage, ZN_NET, "net plugin %s (v%d) has no %s", P(6)->name, pver,
                    what);
}

static ncclResult_t adapt_get_device_mr(void *comm, void *mhandle, void **dptr)
{
    if (pver < 7 || !P(7)->getDeviceMr) return missing("getDeviceMr");
    return P(7)->getDeviceMr(comm, mhandle, dptr);
}

static ncclResult_t adapt_irecv_consumed(void *comm, int n, void *request)
{
    if (pver < 7 || !P(7)->irecvConsumed) return ncclSuccess; /* nothing to release there */
    return P(7)->irecvConsumed(comm, n, request);
}

/* v9..v11 take at most 4 devices; the list is copied rather than the pointer cast, so that a
 * plugin never sees zinc's larger struct. */
static ncclResult_t adapt_make_vdevice(int *d, ncclNetVDeviceProps_t *props)
{
    if (pver < 9 || !P(9)->makeVDevice) return missing("makeVDevice (virtual devices)");
    if (props->ndevs < 0 || props->ndevs > NCCL_NET_MAX_DEVS_PER_NIC_V11)
        return zn_error(ncclInvalidArgument, ZN_NET,
                        "net plugin %s (v%d): makeVDevice of %d devices (its version holds %d)",
                        P(6)->name, pver, props->ndevs, NCCL_NET_MAX_DEVS_PER_NIC_V11);
    ncclNetVDeviceProps_v9_t old = { .ndevs = props->ndevs };
    memcpy(old.devs, props->devs, (size_t)props->ndevs * sizeof(old.devs[0]));
    return P(9)->makeVDevice(d, &old);
}

static ncclResult_t adapt_set_net_attr(void *ctx, ncclNetAttr_t *attr)
{
    if (pver == 11 && P(11)->setNetAttr) return P(11)->setNetAttr(ctx, attr);
    return ncclSuccess; /* versions before v11 take no traffic hints */
}

static ncclNet_t adapter = {
    .name = NULL, /* the plugin's name, set at load */
    .init = adapt_init,
    .devices = adapt_devices,
    .getProperties = adapt_get_properties,
    .listen = adapt_listen,
    .connect = adapt_connect,
    .accept = adapt_accept,
    .regMr = adapt_reg_mr,
    .regMrDmaBuf = adapt_reg_mr_dmabuf,
    .deregMr = adapt_dereg_mr,
    .isend = adapt_isend,
    .irecv = adapt_irecv,
    .iflush = adapt_iflush,
    .test = adapt_test,
    .closeSend = adapt_close_send,
    .closeRecv = adapt_close_recv,
    .closeListen = adapt_close_listen,
    .getDeviceMr = adapt_get_device_mr,
    .irecvConsumed = adapt_irecv_consumed,
    .makeVDevice = adapt_make_vdevice,
    .finalize = adapt_finalize,
    .setNetAttr = adapt_set_net_attr,
};

/* dlopen the library NCCL_NET_PLUGIN names; NULL (with one message) if there is none. */
static void *open_plugin(char *used, size_t used_len)
{
    const char *spec = zn_params()->net_plugin;
    if (spec && strcasecmp(spec, "none") == 0) return NULL;
    char cand[2][1100];
    int ncand = 0;
    if (!spec || !spec[0]) {
        snprintf(cand[ncand++], sizeof(cand[0]), "libnccl-net.so");
    } else if (strchr(spec, '/')) {
        snprintf(cand[ncand++], sizeof(cand[0]), "%s", spec);
    } else {
        snprintf(cand[ncand++], sizeof(cand[0]), "libnccl-net-%s.so", spec);
        snprintf(cand[ncand++], sizeof(cand[0]), "%s", spec);
    }
    char why[600] = "";
    for (int i = 0; i < ncand; i++) {
        void *h = dlopen(cand[i], RTLD_NOW | RTLD_LOCAL);
        if (h) {
            snprintf(used, used_len, "%.1000s", cand[i]);
            return h;
        }
        const char *e = dlerror();
        if (i == 0) snprintf(why, sizeof(why), "%s", e ? e : "?");
    }
    if (spec && spec[0])
        zn_warn(ZN_NET, "NCCL_NET_PLUGIN=%s: cannot load %s (%s); using the built-in nets", spec,
                cand[0], why);
    else
        zn_info(ZN_NET, "no net plugin (%s); using the built-in nets", why);
    return NULL;
}

int zn_net_plugin_load(const ncclNet_t **tables, int *versions, int max)
{
    char path[1100];
    if (max < 1) return 0;
    void *h = open_plugin(path, sizeof(path));
    if (!h) return 0;
#define ZN_VERSION(v) v,
    static const int order[] = { ZN_NET_PLUGIN_SYMBOLS(ZN_VERSION) };
#undef ZN_VERSION
    for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
        char sym[32];
        snprintf(sym, sizeof(sym), "ncclNetPlugin_v%d", order[i]);
        if (order[i] > zn_params()->net_plugin_version) continue;
        const void *t = dlsym(h, sym);
        if (!t) continue;
        zn_info(ZN_NET, "net plugin %s: using %s (%s)", path, sym, *(const char *const *)t);
        versions[0] = order[i];
        if (order[i] == 12) {
            tables[0] = t;
            return 1;
        }
        pver = order[i];
        ptab = t;
        adapter.name = P(6)->name;
        tables[0] = &adapter;
        return 1;
    }
    zn_warn(ZN_NET, "net plugin %s exports no ncclNetPlugin_v6..v12 table; not used", path);
    dlclose(h);
    return 0;
}
