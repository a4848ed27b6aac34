/*
 * IB net: libibverbs by dlopen, device and port discovery, ZINC_IB_HCA filtering and RoCE GID
 * selection.
 */
#include "net/ib.h"
#include "net/net_layer.h"
#include "util/err.h"
#include "util/log.h"
#include "util/param.h"

#include <dlfcn.h>
#include <endian.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct zn_ibv zn_ibv;

static struct zn_ib_dev devs[ZN_IB_MAX_DEVS];
static int ndevs;
static const char *unusable_why;
static char why_buf[256];
static pthread_once_t devs_once = PTHREAD_ONCE_INIT;

int zn_net_ib_ndevs(void)
{
    return ndevs;
}

struct zn_ib_dev *zn_net_ib_dev(int i)
{
    return i >= 0 && i < ndevs ? &devs[i] : NULL;
}

/* ---------------------------------------------------------------------------------------
 * ZINC_IB_HCA
 * ------------------------------------------------------------------------------------- */
/* One field of an item: empty is unset (-1); otherwise a number in [0, max]. 0 if malformed. */
static int hca_field(const char *f, size_t len, long max, int *out)
{
    char num[16];
    if (len == 0) {
        *out = -1;
        return 1;
    }
    if (len >= sizeof(num)) return 0;
    memcpy(num, f, len);
    num[len] = 0;
    char *end;
    long v = strtol(num, &end, 10);
    if (*end != 0 || v < 0 || v > max) return 0;
    *out = (int)v;
    return 1;
}

/* name[:port[:rail[:plane]]] against one port; on a match, the item's rail and plane. */
static int hca_item_match(const char *item, size_t len, int exact, const char *dev, int port,
                          int *rail, int *plane)
{
    const char *f[4];
    size_t flen[4];
    int nf = 0;
    for (const char *p = item, *e = item + len; nf < 4;) {
        const char *colon = memchr(p, ':', (size_t)(e - p));
        f[nf] = p;
        flen[nf++] = colon ? (size_t)(colon - p) : (size_t)(e - p);
        if (!colon) break;
        p = colon + 1;
        if (nf == 4) return 0; /* a fifth field */
    }
    if (exact ? strlen(dev) != flen[0] || strncmp(dev, f[0], flen[0]) != 0
              : strncmp(dev, f[0], flen[0]) != 0)
        return 0;
    int v[3] = { -1, -1, -1 }; /* port, rail, plane */
    static const long max[3] = { INT_MAX, INT16_MAX, INT16_MAX };
    for (int i = 1; i < nf; i++)
        if (!hca_field(f[i], flen[i], max[i - 1], &v[i - 1])) return 0;
    if (v[0] >= 0 && v[0] != port) return 0;
    *rail = v[1];
    *plane = v[2];
    return 1;
}

int zn_net_ib_hca_lookup(const char *rules, const char *dev, int port, int *rail, int *plane)
{
    *rail = *plane = NCCL_NET_ID_UNDEF;
    if (!rules || !*rules) return 1;
    int exclude = 0, exact = 0;
    if (*rules == '^') exclude = 1, rules++;
    if (*rules == '=') exact = 1, rules++;
    int hit = 0, r = NCCL_NET_ID_UNDEF, p = NCCL_NET_ID_UNDEF;
    for (const char *s = rules; *s && !hit;) {
        const char *comma = strchr(s, ',');
        size_t len = comma ? (size_t)(comma - s) : strlen(s);
        if (len) hit = hca_item_match(s, len, exact, dev, port, &r, &p);
        s += len + (comma ? 1 : 0);
    }
    if (exclude) return !hit;
    if (hit) *rail = r, *plane = p;
    return hit;
}

int zn_net_ib_hca_match(const char *rules, const char *dev, int port)
{
    int rail, plane;
    return zn_net_ib_hca_lookup(rules, dev, port, &rail, &plane);
}

/* ---------------------------------------------------------------------------------------
 * Loading
 * ------------------------------------------------------------------------------------- */
static const char *load_library(void)
{
    const char *path = zn_params()->ibverbs_lib;
    if (!path || !*path) path = "libibverbs.so.1";
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(why_buf, sizeof(why_buf), "cannot load %s: %s", path, dlerror());
        return why_buf;
    }
#define ZN_IBV_LOAD(required, name, ret, args)                                              \
    *(void **)&zn_ibv.name = dlsym(h, "ibv_" #name);                                        \
    if (!zn_ibv.name && (#name)[0] == '_') *(void **)&zn_ibv.name = dlsym(h, "_ibv" #name); \
    if (!zn_ibv.name && required) {                                                         \
        snprintf(why_buf, sizeof(why_buf), "%s has no %s", path, "ibv_" #name);             \
        return why_buf;                                                                     \
    }
    ZN_IBV_SYMBOLS(ZN_IBV_LOAD)
#undef ZN_IBV_LOAD
    return NULL;
}

/* ---------------------------------------------------------------------------------------
 * Ports
 * ------------------------------------------------------------------------------------- */
static int query_port(struct ibv_context *ctx, int port, struct ibv_port_attr *a)
{
    memset(a, 0, sizeof(*a)); /* the compat entry point fills only the old fields */
    return zn_ibv.query_port(ctx, (uint8_t)port, (struct _compat_ibv_port_attr *)a);
}

/* Per-lane rate in Mb/s of an active_speed code and lanes of an active_width code. */
static int port_speed_mbps(const struct ibv_port_attr *a)
{
    int lane;
    switch (a->active_speed) {
    case 1: lane = 2500; break;
    case 2: lane = 5000; break;
    case 4:
    case 8: lane = 10000; break;
    case 16: lane = 14000; break;
    case 32: lane = 25000; break;
    case 64: lane = 50000; break;
    case 128: lane = 100000; break;
    default: lane = 10000; break;
    }
    int lanes = a->active_width == 2 ? 4 : a->active_width == 4 ? 8 : a->active_width == 8 ? 12 : 1;
    return lane * lanes;
}

static int gid_is_ipv4_mapped(const union ibv_gid *g)
{
    static const uint8_t prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
    return memcmp(g->raw, prefix, sizeof(prefix)) == 0;
}

/* RoCE: ZINC_IB_GID_INDEX, else the first RoCE v2 IPv4-mapped GID, else the first RoCE v2,
 * else index 0. GID types come from ibv_query_gid_ex where the library has it. */
static int pick_gid(struct zn_ib_dev *d, int tbl_len)
{
    int64_t want = zn_params()->ib_gid_index;
    if (d->link_layer != IBV_LINK_LAYER_ETHERNET) want = 0;
    if (want >= 0) {
        if (want >= tbl_len) return -1;
        d->gid_index = (int)want;
        return zn_ibv.query_gid(d->ctx, (uint8_t)d->port, (int)want, &d->gid) == 0 ? 0 : -1;
    }
    int v2 = -1, v2_ipv4 = -1;
    for (int i = 0; i < tbl_len && zn_ibv._query_gid_ex && v2_ipv4 < 0; i++) {
        struct ibv_gid_entry e;
        if (zn_ibv._query_gid_ex(d->ctx, (uint32_t)d->port, (uint32_t)i, &e, 0, sizeof(e)) != 0)
            continue;
        if (e.gid_type != IBV_GID_TYPE_ROCE_V2) continue;
        if (v2 < 0) v2 = i;
        if (gid_is_ipv4_mapped(&e.gid)) v2_ipv4 = i;
    }
    d->gid_index = v2_ipv4 >= 0 ? v2_ipv4 : v2 >= 0 ? v2 : 0;
    return zn_ibv.query_gid(d->ctx, (uint8_t)d->port, d->gid_index, &d->gid) == 0 ? 0 : -1;
}

/* Whether ibv_reg_dmabuf_mr exists and the device knows it: an fd of -1 answers EBADF where
 * it is supported and EOPNOTSUPP / EPROTONOSUPPORT where it is not. */
static int probe_dmabuf(struct ibv_pd *pd)
{
    if (!zn_ibv.reg_dmabuf_mr || !zn_params()->ib_dmabuf) return 0;
    errno = 0;
    struct ibv_mr *mr = zn_ibv.reg_dmabuf_mr(pd, 0, 4096, 0, -1, IBV_ACCESS_LOCAL_WRITE);
    if (mr) {
        zn_ibv.dereg_mr(mr);
        return 1;
    }
    return errno != EOPNOTSUPP && errno != EPROTONOSUPPORT;
}

static void add_port(struct ibv_context *ctx, struct ibv_pd *pd, const char *name, int port,
                     const struct ibv_port_attr *a, uint64_t guid, int rail, int plane)
{
    struct zn_ib_dev *d = &devs[ndevs];
    memset(d, 0, sizeof(*d));
    snprintf(d->name, sizeof(d->name), "%s", name);
    d->port = port;
    d->rail = (int16_t)rail;
    d->plane = (int16_t)plane;
    d->ctx = ctx;
    d->pd = pd;
    d->link_layer = a->link_layer == IBV_LINK_LAYER_ETHERNET ? IBV_LINK_LAYER_ETHERNET
                                                             : IBV_LINK_LAYER_INFINIBAND;
    d->lid = a->lid;
    d->mtu = a->active_mtu;
    d->speed_mbps = port_speed_mbps(a);
    d->guid = guid;
    char sys[PATH_MAX];
    snprintf(sys, sizeof(sys), "/sys/class/infiniband/%s/device", name);
    if (!realpath(sys, d->pci_path)) d->pci_path[0] = 0;
    if (pick_gid(d, a->gid_tbl_len) != 0) {
        zn_info(ZN_NET, "NET/IB: %s:%d skipped: cannot read GID index %d", name, port,
                d->gid_index);
        return;
    }
    d->dmabuf = probe_dmabuf(pd);
    pthread_mutex_init(&d->lock, NULL);
    ndevs++;
}

/* The usable ports of one device; the context stays open while one of them is used. */
static int scan_device(struct ibv_device *dev, const char *rules)
{
    const char *name = zn_ibv.get_device_name(dev);
    struct ibv_context *ctx = zn_ibv.open_device(dev);
    if (!ctx) {
        zn_info(ZN_NET, "NET/IB: cannot open %s: %s", name, strerror(errno));
        return 0;
    }
    struct ibv_device_attr da;
    struct ibv_pd *pd = NULL;
    int added = 0;
    if (zn_ibv.query_device(ctx, &da) != 0 || !(pd = zn_ibv.alloc_pd(ctx))) goto err_close;
    for (int p = 1; p <= da.phys_port_cnt && ndevs < ZN_IB_MAX_DEVS; p++) {
        struct ibv_port_attr a;
        if (query_port(ctx, p, &a) != 0) continue;
        if (a.state != IBV_PORT_ACTIVE) {
            zn_info(ZN_NET, "NET/IB: %s:%d is %s, not used", name, p,
                    a.state == IBV_PORT_DOWN ? "down" : "not active");
            continue;
        }
        int rail, plane;
        if (!zn_net_ib_hca_lookup(rules, name, p, &rail, &plane)) continue;
        int before = ndevs;
        add_port(ctx, pd, name, p, &a, be64toh(zn_ibv.get_device_guid(dev)), rail, plane);
        added += ndevs > before;
    }
    if (added) return added;
    zn_ibv.dealloc_pd(pd);
err_close:
    zn_ibv.close_device(ctx);
    return 0;
}

static void devices_init_once(void)
{
    if (zn_params()->ib_disable) {
        unusable_why = "disabled by ZINC_IB_DISABLE";
        return;
    }
    if ((unusable_why = load_library()) != NULL) return;
    int n = 0;
    struct ibv_device **list = zn_ibv.get_device_list(&n);
    if (!list || n == 0) {
        snprintf(why_buf, sizeof(why_buf), "%s", list ? "no RDMA device found" : "");
        if (!list)
            snprintf(why_buf, sizeof(why_buf), "no RDMA device (ibv_get_device_list: %s)",
                     strerror(errno));
        unusable_why = why_buf;
        if (list) zn_ibv.free_device_list(list);
        return;
    }
    const char *rules = zn_params()->ib_hca;
    for (int i = 0; i < n && ndevs < ZN_IB_MAX_DEVS; i++) scan_device(list[i], rules);
    zn_ibv.free_device_list(list);
    if (ndevs == 0) {
        snprintf(why_buf, sizeof(why_buf), "%d RDMA device(s) but no active port%s%s", n,
                 rules && *rules ? " matching ZINC_IB_HCA=" : "", rules ? rules : "");
        unusable_why = why_buf;
        return;
    }
    for (int i = 0; i < ndevs; i++)
        zn_info(ZN_NET | ZN_INIT, "NET/IB: [%d] %s:%d %s, %d Mb/s, GID index %d, rail %d, plane %d",
                i, devs[i].name, devs[i].port,
                devs[i].link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "IB", devs[i].speed_mbps,
                devs[i].gid_index, devs[i].rail, devs[i].plane);
}

int zn_net_ib_devices_init(const char **why)
{
    pthread_once(&devs_once, devices_init_once);
    if (why) *why = unusable_why;
    return ndevs;
}

const char *zn_net_ib_why(void)
{
    const char *why = NULL;
    if (zn_net_ib_devices_init(&why) > 0) return NULL;
    return why && why[0] ? why : "no usable port";
}
