/*
 * ibemu: configuration, devices, contexts, ports, GIDs, protection domains, memory regions,
 * async events and the string helpers.
 */
#include "emu.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

/* ---------------------------------------------------------------------------------------
 * Configuration
 * ------------------------------------------------------------------------------------- */
static struct emu_config cfg;
static pthread_once_t cfg_once = PTHREAD_ONCE_INIT;
static struct emu_device devices[EMU_MAX_DEVICES];

void emu_log(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char line[512];
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    fprintf(stderr, "ibemu[%d]: %s\n", (int)getpid(), line);
}

uint64_t emu_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static long env_long(const char *name, long def, long lo, long hi)
{
    const char *s = getenv(name);
    if (!s || !*s) return def;
    char *end;
    long v = strtol(s, &end, 0);
    if (*end || v < lo || v > hi) {
        emu_log("%s=%s is not a number in [%ld, %ld]; using %ld", name, s, lo, hi, def);
        return def;
    }
    return v;
}

/* One device: name[:ib|roce[:nports[:down|down=P]]] */
static void parse_device(char *spec, struct emu_devcfg *d)
{
    char *save = NULL;
    char *name = strtok_r(spec, ":", &save);
    char *ll = strtok_r(NULL, ":", &save);
    char *np = strtok_r(NULL, ":", &save);
    char *st = strtok_r(NULL, ":", &save);
    snprintf(d->name, sizeof(d->name), "%s", name ? name : "mlx5_0");
    d->link_layer = IBV_LINK_LAYER_INFINIBAND;
    if (ll && strcmp(ll, "roce") == 0)
        d->link_layer = IBV_LINK_LAYER_ETHERNET;
    else if (ll && strcmp(ll, "ib") != 0)
        emu_log("device %s: link layer '%s' is not ib or roce", d->name, ll);
    d->nports = np ? atoi(np) : 1;
    if (d->nports < 1 || d->nports > EMU_MAX_PORTS) d->nports = 1;
    if (st && strcmp(st, "down") == 0) {
        for (int p = 1; p <= EMU_MAX_PORTS; p++) d->port_down[p] = 1;
    } else if (st && strncmp(st, "down=", 5) == 0) {
        int p = atoi(st + 5);
        if (p >= 1 && p <= EMU_MAX_PORTS) d->port_down[p] = 1;
    }
}

static const char *const wc_names[] = {
    "SUCCESS",          "LOC_LEN_ERR",       "LOC_QP_OP_ERR",     "LOC_EEC_OP_ERR",
    "LOC_PROT_ERR",     "WR_FLUSH_ERR",      "MW_BIND_ERR",       "BAD_RESP_ERR",
    "LOC_ACCESS_ERR",   "REM_INV_REQ_ERR",   "REM_ACCESS_ERR",    "REM_OP_ERR",
    "RETRY_EXC_ERR",    "RNR_RETRY_EXC_ERR", "LOC_RDD_VIOL_ERR",  "REM_INV_RD_REQ_ERR",
    "REM_ABORT_ERR",    "INV_EECN_ERR",      "INV_EEC_STATE_ERR", "FATAL_ERR",
    "RESP_TIMEOUT_ERR", "GENERAL_ERR",
};

static int parse_wc_status(const char *s)
{
    if (strncmp(s, "IBV_WC_", 7) == 0) s += 7;
    for (size_t i = 0; i < sizeof(wc_names) / sizeof(wc_names[0]); i++)
        if (strcmp(s, wc_names[i]) == 0) return (int)i;
    return atoi(s);
}

/* ZINC_IBEMU_FAULT: comma-separated wc=N:STATUS[:VENDOR], portdown=N, qpfatal=N */
static void parse_faults(const char *spec)
{
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", spec);
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (strncmp(t, "wc=", 3) == 0) {
            char *save2 = NULL;
            char *n = strtok_r(t + 3, ":", &save2);
            char *st = strtok_r(NULL, ":", &save2);
            char *ve = strtok_r(NULL, ":", &save2);
            cfg.fault.wc_n = n ? atol(n) : 0;
            cfg.fault.wc_status = st ? parse_wc_status(st) : IBV_WC_GENERAL_ERR;
            cfg.fault.wc_vendor = ve ? (uint32_t)strtoul(ve, NULL, 0) : 0;
        } else if (strncmp(t, "portdown=", 9) == 0) {
            cfg.fault.portdown_n = atol(t + 9);
        } else if (strncmp(t, "qpfatal=", 8) == 0) {
            cfg.fault.qpfatal_n = atol(t + 8);
        } else {
            emu_log("ZINC_IBEMU_FAULT: unknown fault '%s'", t);
        }
    }
}

static void speed_codes(long gbps, int *speed, int *width)
{
    /* active_speed codes per lane (IB spec): EDR 32 (25 Gb/s), HDR 64 (50), NDR 128 (100);
     * active_width: 1 = 1x, 2 = 4x, 4 = 8x. */
    switch (gbps) {
    case 25: *speed = 32, *width = 1; break;
    case 50: *speed = 64, *width = 1; break;
    case 100: *speed = 32, *width = 2; break;
    case 200: *speed = 64, *width = 2; break;
    case 800: *speed = 128, *width = 4; break;
    default:
        if (gbps != 400)
            emu_log("ZINC_IBEMU_SPEED=%ld: not 25/50/100/200/400/800; using 400", gbps);
        *speed = 128, *width = 2;
    }
}

static void config_load(void)
{
    const char *s = getenv("ZINC_IBEMU_FABRIC");
    if (s && *s)
        snprintf(cfg.fabric, sizeof(cfg.fabric), "%s", s);
    else
        snprintf(cfg.fabric, sizeof(cfg.fabric), "uid%u", (unsigned)getuid());
    s = getenv("ZINC_IBEMU_HOST");
    if (s && *s)
        snprintf(cfg.host, sizeof(cfg.host), "%s", s);
    else if (gethostname(cfg.host, sizeof(cfg.host)) != 0)
        snprintf(cfg.host, sizeof(cfg.host), "host");
    cfg.debug = (int)env_long("ZINC_IBEMU_DEBUG", 0, 0, 1);
    cfg.dmabuf = (int)env_long("ZINC_IBEMU_DMABUF", 1, 0, 1);
    cfg.ring_bytes = (uint64_t)env_long("ZINC_IBEMU_RING_KB", 1024, 64, 1 << 20) * 1024;
    cfg.retry_cap_ns = (uint64_t)env_long("ZINC_IBEMU_RETRY_CAP_MS", 5000, 1, 3600000) * 1000000;
    cfg.ack_delay_ns = (uint64_t)env_long("ZINC_IBEMU_ACK_DELAY_MS", 0, 0, 60000) * 1000000;
    speed_codes(env_long("ZINC_IBEMU_SPEED", 400, 1, 100000), &cfg.speed, &cfg.width);
    s = getenv("ZINC_IBEMU_FAULT");
    if (s && *s) parse_faults(s);

    s = getenv("ZINC_IBEMU_DEVICES");
    char buf[512];
    snprintf(buf, sizeof(buf), "%s", s ? s : "mlx5_0:ib");
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t && cfg.ndev < EMU_MAX_DEVICES;
         t = strtok_r(NULL, ",", &save)) {
        struct emu_devcfg *d = &cfg.dev[cfg.ndev];
        parse_device(t, d);
        struct emu_device *e = &devices[cfg.ndev];
        e->index = cfg.ndev;
        e->cfg = d;
        e->dev.node_type = IBV_NODE_CA;
        e->dev.transport_type = IBV_TRANSPORT_IB;
        snprintf(e->dev.name, sizeof(e->dev.name), "%s", d->name);
        snprintf(e->dev.dev_name, sizeof(e->dev.dev_name), "uverbs%d", cfg.ndev);
        snprintf(e->dev.dev_path, sizeof(e->dev.dev_path), "/sys/class/infiniband_verbs/uverbs%d",
                 cfg.ndev);
        snprintf(e->dev.ibdev_path, sizeof(e->dev.ibdev_path), "/sys/class/infiniband/%s", d->name);
        e->guid = 0x248a070300ab0000ull | ((uint64_t)cfg.ndev << 8);
        cfg.ndev++;
    }
}

const struct emu_config *emu_config(void)
{
    pthread_once(&cfg_once, config_load);
    return &cfg;
}

#define dbg(...)                                       \
    do {                                               \
        if (emu_config()->debug) emu_log(__VA_ARGS__); \
    } while (0)

/* ---------------------------------------------------------------------------------------
 * Devices and contexts
 * ------------------------------------------------------------------------------------- */
static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;
static struct emu_ctx *open_ctxs;

EMU_EXPORT struct ibv_device **(ibv_get_device_list)(int *num)
{
    const struct emu_config *c = emu_config();
    struct ibv_device **list = calloc((size_t)c->ndev + 1, sizeof(*list));
    if (!list) {
        errno = ENOMEM;
        return NULL;
    }
    for (int i = 0; i < c->ndev; i++) list[i] = &devices[i].dev;
    if (num) *num = c->ndev;
    return list;
}

EMU_EXPORT void ibv_free_device_list(struct ibv_device **list)
{
    free(list);
}

EMU_EXPORT const char *ibv_get_device_name(struct ibv_device *dev)
{
    return dev->name;
}

EMU_EXPORT __be64 ibv_get_device_guid(struct ibv_device *dev)
{
    return htobe64(((struct emu_device *)dev)->guid);
}

EMU_EXPORT int ibv_fork_init(void)
{
    return 0;
}

static int ctx_start(struct emu_ctx *c)
{
    const struct emu_devcfg *d = c->dev->cfg;
    struct emu_fabric *f = emu_fabric();
    if (!f) return -1;
    emu_reclaim_dead();
    if (pipe2(c->ev_pipe, O_CLOEXEC) != 0) return -1;
    fcntl(c->ev_pipe[1], F_SETFL, O_NONBLOCK);
    c->nic_slot = emu_nic_slot_alloc();
    if (c->nic_slot < 0) goto err_close_pipe;
    for (int p = 1; p <= d->nports; p++) {
        c->port_slot[p] = emu_port_slot(d->name, p);
        atomic_store(&f->ports[c->port_slot[p]].down, (uint32_t)d->port_down[p]);
    }
    if (pthread_create(&c->nic, NULL, emu_nic_main, c) != 0) goto err_free_slot;
    return 0;

err_free_slot:
    emu_nic_slot_free(c->nic_slot);
err_close_pipe:
    close(c->ev_pipe[0]);
    close(c->ev_pipe[1]);
    return -1;
}

EMU_EXPORT struct ibv_context *ibv_open_device(struct ibv_device *dev)
{
    struct emu_ctx *c = calloc(1, sizeof(*c));
    if (!c) {
        errno = ENOMEM;
        return NULL;
    }
    c->dev = (struct emu_device *)dev;
    c->ctx.device = dev;
    c->ctx.cmd_fd = -1;
    c->ctx.num_comp_vectors = 1;
    c->ctx.abi_compat = NULL; /* not an extended (verbs_context) context */
    c->ctx.ops.post_send = emu_post_send;
    c->ctx.ops.post_recv = emu_post_recv;
    c->ctx.ops.poll_cq = emu_poll_cq;
    pthread_mutex_init(&c->ctx.mutex, NULL);
    pthread_mutex_init(&c->lock, NULL);
    pthread_mutex_init(&c->ev_lock, NULL);
    if (ctx_start(c) != 0) {
        int e = errno;
        dbg("ibv_open_device(%s): %s", dev->name, strerror(e));
        free(c);
        errno = e;
        return NULL;
    }
    c->ctx.async_fd = c->ev_pipe[0];
    pthread_mutex_lock(&open_lock);
    c->next_open = open_ctxs;
    open_ctxs = c;
    pthread_mutex_unlock(&open_lock);
    dbg("opened %s (nic slot %d)", dev->name, c->nic_slot);
    return &c->ctx;
}

EMU_EXPORT int ibv_close_device(struct ibv_context *ctx)
{
    struct emu_ctx *c = (struct emu_ctx *)ctx;
    pthread_mutex_lock(&open_lock);
    for (struct emu_ctx **pp = &open_ctxs; *pp; pp = &(*pp)->next_open)
        if (*pp == c) {
            *pp = c->next_open;
            break;
        }
    pthread_mutex_unlock(&open_lock);
    atomic_store(&c->stop, 1);
    emu_nic_kick((uint32_t)c->nic_slot);
    pthread_join(c->nic, NULL);
    emu_nic_slot_free(c->nic_slot);
    close(c->ev_pipe[0]);
    close(c->ev_pipe[1]);
    free(c);
    return 0;
}

EMU_EXPORT int ibv_query_device(struct ibv_context *ctx, struct ibv_device_attr *a)
{
    struct emu_ctx *c = (struct emu_ctx *)ctx;
    memset(a, 0, sizeof(*a));
    snprintf(a->fw_ver, sizeof(a->fw_ver), "ibemu-1.0");
    a->node_guid = htobe64(c->dev->guid);
    a->sys_image_guid = htobe64(c->dev->guid);
    a->max_mr_size = ~0ull;
    a->page_size_cap = 0xfffff000u;
    a->vendor_id = 0x02c9; /* reported as Mellanox, the vendor zinc's tuning knows */
    a->vendor_part_id = 4129;
    a->max_qp = EMU_QP_SLOTS - 1;
    a->max_qp_wr = EMU_MAX_QP_WR;
    a->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_PORT_ACTIVE_EVENT;
    a->max_sge = EMU_MAX_SGE;
    a->max_sge_rd = EMU_MAX_SGE;
    a->max_cq = 1 << 16;
    a->max_cqe = EMU_MAX_CQE;
    a->max_mr = 1 << 24;
    a->max_pd = 1 << 16;
    a->max_qp_rd_atom = EMU_MAX_RD_ATOMIC;
    a->max_qp_init_rd_atom = EMU_MAX_RD_ATOMIC;
    a->max_res_rd_atom = EMU_MAX_RD_ATOMIC * (EMU_QP_SLOTS - 1);
    a->atomic_cap = IBV_ATOMIC_NONE;
    a->max_pkeys = 1;
    a->local_ca_ack_delay = 16;
    a->phys_port_cnt = (uint8_t)c->dev->cfg->nports;
    return 0;
}

static int port_is_down(struct emu_ctx *c, int port)
{
    return c->dev->cfg->port_down[port] ||
           atomic_load(&emu_fabric()->ports[c->port_slot[port]].down);
}

/* The exported ibv_query_port fills the struct as libibverbs' compat entry point does; verbs.h
 * wraps it in an inline that zeroes the caller's struct first. */
EMU_EXPORT int(ibv_query_port)(struct ibv_context *ctx, uint8_t port,
                               struct _compat_ibv_port_attr *out)
{
    struct emu_ctx *c = (struct emu_ctx *)ctx;
    const struct emu_devcfg *d = c->dev->cfg;
    if (port < 1 || port > d->nports) return EINVAL;
    int eth = d->link_layer == IBV_LINK_LAYER_ETHERNET;
    int down = port_is_down(c, port);
    struct ibv_port_attr a;
    memset(&a, 0, sizeof(a));
    a.state = down ? IBV_PORT_DOWN : IBV_PORT_ACTIVE;
    a.max_mtu = IBV_MTU_4096;
    a.active_mtu = eth ? IBV_MTU_1024 : IBV_MTU_4096;
    a.gid_tbl_len = eth ? 256 : 128;
    a.port_cap_flags = eth ? 0 : IBV_PORT_CM_SUP;
    a.max_msg_sz = EMU_MAX_MSG_SZ;
    a.pkey_tbl_len = 1;
    a.lid = eth ? 0 : (uint16_t)(c->port_slot[port] + 1);
    a.sm_lid = eth ? 0 : 1;
    a.max_vl_num = 4;
    a.subnet_timeout = 18;
    a.active_width = (uint8_t)emu_config()->width;
    a.active_speed = (uint8_t)emu_config()->speed;
    a.phys_state = down ? 3 : 5; /* Disabled, LinkUp */
    a.link_layer = (uint8_t)d->link_layer;
    memcpy(out, &a, sizeof(a));
    return 0;
}

EMU_EXPORT int ibv_query_gid(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid)
{
    struct emu_ctx *c = (struct emu_ctx *)ctx;
    const struct emu_devcfg *d = c->dev->cfg;
    int eth = d->link_layer == IBV_LINK_LAYER_ETHERNET;
    if (port < 1 || port > d->nports || index < 0 || index >= (eth ? 256 : 128)) {
        errno = EINVAL;
        return -1;
    }
    int type;
    emu_port_gid(c->port_slot[port], d->link_layer, index, gid, &type);
    return 0;
}

EMU_EXPORT int _ibv_query_gid_ex(struct ibv_context *ctx, uint32_t port, uint32_t index,
                                 struct ibv_gid_entry *entry, uint32_t flags, size_t entry_size)
{
    struct emu_ctx *c = (struct emu_ctx *)ctx;
    const struct emu_devcfg *d = c->dev->cfg;
    if (flags || port < 1 || port > (uint32_t)d->nports || index >= 256) return EINVAL;
    if (index >= (uint32_t)emu_port_gid_count(d->link_layer)) return ENODATA;
    struct ibv_gid_entry e;
    memset(&e, 0, sizeof(e));
    int type;
    emu_port_gid(c->port_slot[port], d->link_layer, (int)index, &e.gid, &type);
    e.gid_index = index;
    e.port_num = port;
    e.gid_type = (uint32_t)type;
    e.ndev_ifindex = d->link_layer == IBV_LINK_LAYER_ETHERNET ? 1000 + (uint32_t)c->dev->index : 0;
    memcpy(entry, &e, entry_size < sizeof(e) ? entry_size : sizeof(e));
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * Protection domains and memory regions
 * ------------------------------------------------------------------------------------- */
EMU_EXPORT struct ibv_pd *ibv_alloc_pd(struct ibv_context *ctx)
{
    struct emu_pd *p = calloc(1, sizeof(*p));
    if (!p) {
        errno = ENOMEM;
        return NULL;
    }
    p->pd.context = ctx;
    return &p->pd;
}

EMU_EXPORT int ibv_dealloc_pd(struct ibv_pd *pd)
{
    struct emu_pd *p = (struct emu_pd *)pd;
    if (atomic_load(&p->refs) != 0) return EBUSY;
    free(p);
    return 0;
}

struct emu_mr *emu_mr_find(struct emu_ctx *c, uint32_t key)
{
    for (struct emu_mr *m = c->mrs[key & 255]; m; m = m->next)
        if (m->mr.lkey == key) return m;
    return NULL;
}

static struct ibv_mr *mr_add(struct ibv_pd *pd, uint8_t *host, size_t len, uint64_t iova,
                             unsigned access, void *map, size_t map_len, void *gpu)
{
    /* Remote write (or atomic) access requires local write, as the verbs spec says. */
    if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
        !(access & IBV_ACCESS_LOCAL_WRITE)) {
        errno = EINVAL;
        return NULL;
    }
    if (len == 0 || iova + len < iova) {
        errno = EINVAL;
        return NULL;
    }
    struct emu_mr *m = calloc(1, sizeof(*m));
    if (!m) {
        errno = ENOMEM;
        return NULL;
    }
    struct emu_ctx *c = (struct emu_ctx *)pd->context;
    uint32_t key;
    do { /* a bijection of the counter: keys are unique on the fabric and look random */
        key = (atomic_fetch_add(&emu_fabric()->next_key, 1) + 1) * 0x9e3779b1u;
    } while (key == 0);
    m->mr.context = pd->context;
    m->mr.pd = pd;
    m->mr.addr = (void *)(uintptr_t)iova;
    m->mr.length = len;
    m->mr.lkey = m->mr.rkey = key;
    m->mr.handle = key;
    m->iova = iova;
    m->host = host;
    m->len = len;
    m->access = (int)access;
    m->map = map;
    m->map_len = map_len;
    m->gpu = gpu;
    if (gpu && emu_config()->debug)
        emu_log("MR %#x: %zu bytes of GPU memory at %p", key, len, (void *)host);
    pthread_mutex_lock(&c->lock);
    m->next = c->mrs[key & 255];
    c->mrs[key & 255] = m;
    pthread_mutex_unlock(&c->lock);
    atomic_fetch_add(&((struct emu_pd *)pd)->refs, 1);
    return &m->mr;
}

EMU_EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t len, uint64_t iova,
                                           unsigned int access)
{
    return mr_add(pd, addr, len, iova, access, NULL, 0, emu_gpu_context(addr));
}

EMU_EXPORT struct ibv_mr *(ibv_reg_mr)(struct ibv_pd *pd, void *addr, size_t len, int access)
{
    return mr_add(pd, addr, len, (uintptr_t)addr, (unsigned)access, NULL, 0, emu_gpu_context(addr));
}

/* A dmabuf is mapped into this process (a udmabuf or memfd can be). GPU memory cannot be: then,
 * where the iova is GPU memory of this process (callers pass the buffer's address as the iova,
 * as NCCL does), the region is that GPU memory (emu_gpu.c) -- the test double's stand-in for a
 * NIC that registers a GPU's dmabuf; otherwise the mmap error. fd -1 answers EBADF, which is how
 * callers probe support. */
EMU_EXPORT struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t len,
                                            uint64_t iova, int fd, int access)
{
    if (!emu_config()->dmabuf) {
        errno = EOPNOTSUPP;
        return NULL;
    }
    if (fd < 0) {
        errno = EBADF;
        return NULL;
    }
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t start = offset & ~(page - 1);
    size_t map_len = (size_t)(offset - start + len);
    void *map = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)start);
    if (map == MAP_FAILED) {
        int e = errno;
        void *gpu = emu_gpu_context((void *)(uintptr_t)iova);
        if (gpu)
            return mr_add(pd, (uint8_t *)(uintptr_t)iova, len, iova, (unsigned)access, NULL, 0,
                          gpu);
        errno = e;
        return NULL;
    }
    struct ibv_mr *mr = mr_add(pd, (uint8_t *)map + (offset - start), len, iova, (unsigned)access,
                               map, map_len, NULL);
    if (!mr) {
        int e = errno;
        munmap(map, map_len);
        errno = e;
    }
    return mr;
}

EMU_EXPORT int ibv_dereg_mr(struct ibv_mr *mr)
{
    struct emu_mr *m = (struct emu_mr *)mr;
    struct emu_ctx *c = (struct emu_ctx *)mr->context;
    pthread_mutex_lock(&c->lock);
    for (struct emu_mr **pp = &c->mrs[mr->lkey & 255]; *pp; pp = &(*pp)->next)
        if (*pp == m) {
            *pp = m->next;
            break;
        }
    pthread_mutex_unlock(&c->lock);
    atomic_fetch_sub(&((struct emu_pd *)mr->pd)->refs, 1);
    if (m->map) munmap(m->map, m->map_len);
    free(m);
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * Async events: a queue per context, and one byte in a pipe per event so that async_fd
 * behaves like the real one (poll()able; O_NONBLOCK makes ibv_get_async_event fail with
 * EAGAIN when nothing is pending).
 * ------------------------------------------------------------------------------------- */
void emu_async_event(struct emu_ctx *c, enum ibv_event_type type, void *element, int port)
{
    pthread_mutex_lock(&c->ev_lock);
    int full = c->ev_count == EMU_EVENTS;
    if (full) { /* drop the oldest; the number of pending events (pipe bytes) stays */
        c->ev_head = (c->ev_head + 1) % EMU_EVENTS;
        c->ev_count--;
    }
    struct ibv_async_event *e = &c->ev[(c->ev_head + c->ev_count) % EMU_EVENTS];
    memset(e, 0, sizeof(*e));
    e->event_type = type;
    if (port)
        e->element.port_num = port;
    else if (type == IBV_EVENT_CQ_ERR)
        e->element.cq = element;
    else
        e->element.qp = element;
    c->ev_count++;
    pthread_mutex_unlock(&c->ev_lock);
    if (!full) {
        ssize_t rc = write(c->ev_pipe[1], "e", 1);
        (void)rc;
    }
    dbg("async event %s", ibv_event_type_str(type));
}

EMU_EXPORT int ibv_get_async_event(struct ibv_context *ctx, struct ibv_async_event *event)
{
    struct emu_ctx *c = (struct emu_ctx *)ctx;
    char b;
    if (read(ctx->async_fd, &b, 1) != 1) return -1;
    pthread_mutex_lock(&c->ev_lock);
    int have = c->ev_count > 0;
    if (have) {
        *event = c->ev[c->ev_head];
        c->ev_head = (c->ev_head + 1) % EMU_EVENTS;
        c->ev_count--;
    }
    pthread_mutex_unlock(&c->ev_lock);
    if (!have) {
        errno = EAGAIN;
        return -1;
    }
    return 0;
}

EMU_EXPORT void ibv_ack_async_event(struct ibv_async_event *event)
{
    (void)event;
}

/* Fault injection "portdown": every port of every open context goes down for every process
 * of this emulated host, as a cable pull would; each context gets IBV_EVENT_PORT_ERR. */
void emu_ports_down(void)
{
    struct emu_fabric *f = emu_fabric();
    pthread_mutex_lock(&open_lock);
    for (struct emu_ctx *c = open_ctxs; c; c = c->next_open) {
        for (int p = 1; p <= c->dev->cfg->nports; p++) {
            atomic_store(&f->ports[c->port_slot[p]].down, 1);
            emu_async_event(c, IBV_EVENT_PORT_ERR, NULL, p);
        }
    }
    pthread_mutex_unlock(&open_lock);
}

/* ---------------------------------------------------------------------------------------
 * Strings
 * ------------------------------------------------------------------------------------- */
EMU_EXPORT const char *ibv_wc_status_str(enum ibv_wc_status status)
{
    static const char *const s[] = {
        [IBV_WC_SUCCESS] = "success",
        [IBV_WC_LOC_LEN_ERR] = "local length error",
        [IBV_WC_LOC_QP_OP_ERR] = "local QP operation error",
        [IBV_WC_LOC_EEC_OP_ERR] = "local EE context operation error",
        [IBV_WC_LOC_PROT_ERR] = "local protection error",
        [IBV_WC_WR_FLUSH_ERR] = "work request flushed error",
        [IBV_WC_MW_BIND_ERR] = "memory window bind error",
        [IBV_WC_BAD_RESP_ERR] = "bad response error",
        [IBV_WC_LOC_ACCESS_ERR] = "local access error",
        [IBV_WC_REM_INV_REQ_ERR] = "remote invalid request error",
        [IBV_WC_REM_ACCESS_ERR] = "remote access error",
        [IBV_WC_REM_OP_ERR] = "remote operation error",
        [IBV_WC_RETRY_EXC_ERR] = "transport retry counter exceeded",
        [IBV_WC_RNR_RETRY_EXC_ERR] = "RNR retry counter exceeded",
        [IBV_WC_LOC_RDD_VIOL_ERR] = "local RDD violation error",
        [IBV_WC_REM_INV_RD_REQ_ERR] = "remote invalid RD request",
        [IBV_WC_REM_ABORT_ERR] = "aborted error",
        [IBV_WC_INV_EECN_ERR] = "invalid EE context number",
        [IBV_WC_INV_EEC_STATE_ERR] = "invalid EE context state",
        [IBV_WC_FATAL_ERR] = "fatal error",
        [IBV_WC_RESP_TIMEOUT_ERR] = "response timeout error",
        [IBV_WC_GENERAL_ERR] = "general error",
        [IBV_WC_TM_ERR] = "TM error",
        [IBV_WC_TM_RNDV_INCOMPLETE] = "TM software rendezvous",
    };
    if ((unsigned)status >= sizeof(s) / sizeof(s[0]) || !s[status]) return "unknown";
    return s[status];
}

EMU_EXPORT const char *ibv_event_type_str(enum ibv_event_type event)
{
    static const char *const s[] = {
        [IBV_EVENT_CQ_ERR] = "CQ error",
        [IBV_EVENT_QP_FATAL] = "local work queue catastrophic error",
        [IBV_EVENT_QP_REQ_ERR] = "invalid request local work queue error",
        [IBV_EVENT_QP_ACCESS_ERR] = "local access violation work queue error",
        [IBV_EVENT_COMM_EST] = "communication established",
        [IBV_EVENT_SQ_DRAINED] = "send queue drained",
        [IBV_EVENT_PATH_MIG] = "path migrated",
        [IBV_EVENT_PATH_MIG_ERR] = "path migration request error",
        [IBV_EVENT_DEVICE_FATAL] = "local catastrophic error",
        [IBV_EVENT_PORT_ACTIVE] = "port active",
        [IBV_EVENT_PORT_ERR] = "port error",
        [IBV_EVENT_LID_CHANGE] = "LID change",
        [IBV_EVENT_PKEY_CHANGE] = "P_Key change",
        [IBV_EVENT_SM_CHANGE] = "SM change",
        [IBV_EVENT_SRQ_ERR] = "SRQ catastrophic error",
        [IBV_EVENT_SRQ_LIMIT_REACHED] = "SRQ limit reached",
        [IBV_EVENT_QP_LAST_WQE_REACHED] = "last WQE reached",
        [IBV_EVENT_CLIENT_REREGISTER] = "client reregistration",
        [IBV_EVENT_GID_CHANGE] = "GID table change",
        [IBV_EVENT_WQ_FATAL] = "WQ fatal",
    };
    if ((unsigned)event >= sizeof(s) / sizeof(s[0]) || !s[event]) return "unknown";
    return s[event];
}

EMU_EXPORT const char *ibv_port_state_str(enum ibv_port_state state)
{
    static const char *const s[] = { "PORT_NOP",   "PORT_DOWN",   "PORT_INIT",
                                     "PORT_ARMED", "PORT_ACTIVE", "PORT_ACTIVE_DEFER" };
    if ((unsigned)state >= sizeof(s) / sizeof(s[0])) return "unknown";
    return s[state];
}
