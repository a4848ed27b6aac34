/*
 * The registry of nets: plugin nets first, then the built-ins of ZN_NET_BUILTINS, each kept
 * only if its init() succeeds and it has at least one device. Built once per process. The nets
 * it does not use are remembered with the reason, which is logged here once (at INFO for a net
 * without devices, as a warning for a failed init) and listed by `zinc-info nets`.
 */
#include "net/net_layer.h"
#include "util/err.h"
#include "util/log.h"
#include "util/param.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <strings.h>

static struct zn_net nets[ZN_NET_MAX];
static int nnets;
static struct zn_net_unused unused[ZN_NET_MAX];
static int nunused;
static pthread_once_t nets_once = PTHREAD_ONCE_INIT;

void zn_net_logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
                   const char *fmt, ...)
{
    int lvl = level == NCCL_LOG_WARN    ? ZN_LOG_WARN
              : level == NCCL_LOG_INFO  ? ZN_LOG_INFO
              : level == NCCL_LOG_TRACE ? ZN_LOG_TRACE
              : level == NCCL_LOG_ABORT ? ZN_LOG_WARN
                                        : ZN_LOG_NONE;
    if (lvl == ZN_LOG_NONE || !zn_log_enabled(lvl, ZN_NET)) return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    zn_log_emit(lvl, ZN_NET, file ? file : "plugin", line, "%s", msg);
}

static void set_unused(const char *name, int plugin_version, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_unused(const char *name, int plugin_version, const char *fmt, ...)
{
    if (nunused == ZN_NET_MAX) return;
    struct zn_net_unused *u = &unused[nunused++];
    u->name = name;
    u->plugin_version = plugin_version;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(u->why, sizeof(u->why), fmt, ap);
    va_end(ap);
}

/* Why a built-in net has no devices, when it can say (the IB net can). */
static const char *no_device_why(const ncclNet_t *ops)
{
#if defined(ZINC_HAVE_IBVERBS) && ZINC_HAVE_IBVERBS
    if (ops == &zn_net_ib) return zn_net_ib_why();
#endif
    (void)ops;
    return NULL;
}

/* Probe one net: init once for the registry, count its devices. */
static void add_net(const ncclNet_t *ops, int plugin_version)
{
    if (nnets == ZN_NET_MAX) {
        zn_warn(ZN_NET, "net registry full (%d nets): net %s is not used", ZN_NET_MAX, ops->name);
        return;
    }
    struct zn_net *n = &nets[nnets];
    ncclNetCommConfig_t cfg = { .trafficClass = NCCL_NET_TRAFFIC_CLASS_UNDEF };
    zn_clear_last_error(); /* a plugin reports through its logger, not zn_error */
    ncclResult_t r = ops->init(&n->ctx, 0, &cfg, zn_net_logger, NULL);
    if (r != ncclSuccess) {
        const char *why = zn_last_error();
        zn_warn(ZN_NET, "net %s%s: init failed: %s%s; skipping it", ops->name,
                plugin_version ? " (plugin)" : "", why[0] ? why : zn_result_str(r),
                why[0] ? "" : " (its own log lines at ZINC_DEBUG=INFO say more)");
        set_unused(ops->name, plugin_version, "init failed: %s", why[0] ? why : zn_result_str(r));
        return;
    }
    int ndev = 0;
    if (ops->devices(&ndev) != ncclSuccess || ndev <= 0) {
        const char *why = plugin_version ? NULL : no_device_why(ops);
        zn_info(ZN_NET | ZN_INIT, "net %s not used: %s", ops->name, why ? why : "no devices");
        set_unused(ops->name, plugin_version, "%s", why ? why : "no devices");
        ops->finalize(n->ctx);
        return;
    }
    n->ops = ops;
    n->name = ops->name;
    n->ndev = ndev;
    n->plugin_version = plugin_version;
    zn_info(ZN_NET, "net %d: %s, %d device(s)%s", nnets, ops->name, ndev,
            plugin_version ? " (from a plugin)" : "");
    nnets++;
}

static void build(void)
{
    const ncclNet_t *tables[ZN_NET_MAX];
    int versions[ZN_NET_MAX];
    int np = zn_net_plugin_load(tables, versions, ZN_NET_MAX);
    for (int i = 0; i < np; i++) add_net(tables[i], versions[i]);
#define ZN_X(name) add_net(&zn_net_##name, 0);
    ZN_NET_BUILTINS(ZN_X)
#undef ZN_X
#if !defined(ZINC_HAVE_IBVERBS) || !ZINC_HAVE_IBVERBS
    set_unused("IB", 0,
               "not built: rdma-core's <infiniband/verbs.h> (libibverbs-dev) was "
               "missing when this library was built");
#endif
}

int zn_net_count(void)
{
    pthread_once(&nets_once, build);
    return nnets;
}

const struct zn_net *zn_net_get(int i)
{
    return i >= 0 && i < zn_net_count() ? &nets[i] : NULL;
}

int zn_net_unused_count(void)
{
    zn_net_count();
    return nunused;
}

const struct zn_net_unused *zn_net_unused_get(int i)
{
    return i >= 0 && i < zn_net_unused_count() ? &unused[i] : NULL;
}

const char *zn_net_why(const char *name)
{
    for (int i = 0; i < zn_net_unused_count(); i++)
        if (strcasecmp(unused[i].name, name) == 0) return unused[i].why;
    return NULL;
}

const struct zn_net_rma_ops *zn_net_rma(const struct zn_net *net)
{
#if defined(ZINC_HAVE_IBVERBS) && ZINC_HAVE_IBVERBS
    if (net && net->ops == &zn_net_ib) return &zn_net_ib_rma;
#endif
    (void)net;
    return NULL;
}

const struct zn_net *zn_net_find(const char *name)
{
    for (int i = 0; i < zn_net_count(); i++)
        if (strcasecmp(nets[i].name, name) == 0) return &nets[i];
    return NULL;
}

ncclResult_t zn_net_select(const struct zn_net **out)
{
    const char *want = zn_params()->net;
    int n = zn_net_count();
    if (want && want[0]) {
        const struct zn_net *net = zn_net_find(want);
        if (net) {
            *out = net;
            return ncclSuccess;
        }
        char list[256] = "";
        size_t len = 0;
        for (int i = 0; i < n && len < sizeof(list); i++)
            len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%s", i ? ", " : "",
                                    nets[i].name);
        return zn_error(ncclInvalidArgument, ZN_NET,
                        "ZINC_NET/NCCL_NET=%s: no such net (usable nets: %s)", want,
                        n ? list : "none");
    }
    if (n == 0)
        return zn_error(ncclSystemError, ZN_NET,
                        "no usable net (no plugin net and no built-in net with a device)");
    *out = &nets[0];
    return ncclSuccess;
}
