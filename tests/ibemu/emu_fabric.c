/*
 * ibemu's shared memory: the fabric directory, QP segments, rings, doorbells and liveness.
 */
#include "emu.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static struct emu_fabric *fabric;
static pthread_once_t fabric_once = PTHREAD_ONCE_INIT;

static void fabric_open(void)
{
    char name[128];
    snprintf(name, sizeof(name), "/zinc-ibemu-%s", emu_config()->fabric);
    int fd = shm_open(name, O_RDWR | O_CREAT, 0600);
    if (fd < 0) {
        emu_log("cannot open fabric segment %s: %s", name, strerror(errno));
        return;
    }
    struct stat st;
    /* Several processes may create the segment at once: growing it to the same size is
     * harmless, and an all-zero fabric is a valid empty one. */
    if (fstat(fd, &st) != 0 || ((size_t)st.st_size < sizeof(struct emu_fabric) &&
                                ftruncate(fd, sizeof(struct emu_fabric)) != 0)) {
        emu_log("cannot size fabric segment %s: %s", name, strerror(errno));
        close(fd);
        return;
    }
    void *p = mmap(NULL, sizeof(struct emu_fabric), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        emu_log("cannot map fabric segment %s: %s", name, strerror(errno));
        return;
    }
    struct emu_fabric *f = p;
    uint64_t zero = 0;
    if (!atomic_compare_exchange_strong(&f->magic, &zero, EMU_FABRIC_MAGIC) &&
        zero != EMU_FABRIC_MAGIC) {
        emu_log("fabric segment %s has magic %#llx, not %#llx (another ibemu version?)", name,
                (unsigned long long)zero, (unsigned long long)EMU_FABRIC_MAGIC);
        munmap(p, sizeof(struct emu_fabric));
        return;
    }
    fabric = f;
}

struct emu_fabric *emu_fabric(void)
{
    pthread_once(&fabric_once, fabric_open);
    if (!fabric) errno = ENODEV;
    return fabric;
}

int emu_pid_dead(int32_t pid)
{
    return pid > 0 && kill(pid, 0) != 0 && errno == ESRCH;
}

static uint64_t hash64(const char *a, const char *b, int port)
{
    uint64_t h = 1469598103934665603ull;
    for (const char *s = a; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull;
    for (const char *s = b; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    h = (h ^ (uint64_t)port) * 1099511628211ull;
    return h ? h : 1;
}

/* The directory slot of (host, device, port): ports of one emulated host are shared by all
 * its processes, as a real HCA is. The slot number gives the port its LID, GUID and GIDs. */
uint32_t emu_port_slot(const char *dev, int port)
{
    struct emu_fabric *f = emu_fabric();
    uint64_t key = hash64(emu_config()->host, dev, port);
    for (uint32_t i = 0; i < EMU_PORT_SLOTS; i++) {
        uint32_t s = (uint32_t)((key + i) % EMU_PORT_SLOTS);
        uint64_t cur = atomic_load(&f->ports[s].key);
        if (cur == key) return s;
        if (cur == 0) {
            if (atomic_compare_exchange_strong(&f->ports[s].key, &cur, key) || cur == key) return s;
        }
    }
    return 0; /* full: ports share slot 0 (their addresses collide, nothing else breaks) */
}

int emu_port_gid_count(int link_layer)
{
    return link_layer == IBV_LINK_LAYER_ETHERNET ? 4 : 1;
}

/* GID tables: InfiniBand ports have the link-local GID of their GUID at index 0. RoCE ports
 * have, like a Linux netdev with one IPv4 address: 0/1 link-local (v1/v2), 2/3 IPv4-mapped
 * 10.73.<slot>.1 (v1/v2). Entries past those are empty (all zero). */
void emu_port_gid(uint32_t slot, int link_layer, int index, union ibv_gid *gid, int *type)
{
    memset(gid, 0, sizeof(*gid));
    *type = IBV_GID_TYPE_IB;
    if (index < 0 || index >= emu_port_gid_count(link_layer)) return;
    uint64_t guid = 0x248a0703000a0000ull | slot;
    if (index < 2) {
        gid->raw[0] = 0xfe;
        gid->raw[1] = 0x80;
        for (int i = 0; i < 8; i++) gid->raw[8 + i] = (uint8_t)(guid >> (56 - 8 * i));
    } else {
        gid->raw[10] = 0xff;
        gid->raw[11] = 0xff;
        gid->raw[12] = 10;
        gid->raw[13] = 73;
        gid->raw[14] = (uint8_t)slot;
        gid->raw[15] = 1;
    }
    if (link_layer == IBV_LINK_LAYER_ETHERNET)
        *type = (index % 2) ? IBV_GID_TYPE_ROCE_V2 : IBV_GID_TYPE_ROCE_V1;
}

int emu_nic_slot_alloc(void)
{
    struct emu_fabric *f = emu_fabric();
    int32_t me = getpid();
    for (int s = 0; s < EMU_NIC_SLOTS; s++) {
        int32_t pid = atomic_load(&f->nics[s].pid);
        if ((pid == 0 || emu_pid_dead(pid)) &&
            atomic_compare_exchange_strong(&f->nics[s].pid, &pid, me)) {
            atomic_store(&f->nics[s].sleeping, 0);
            return s;
        }
    }
    errno = ENOSPC;
    return -1;
}

void emu_nic_slot_free(int slot)
{
    atomic_store(&emu_fabric()->nics[slot].pid, 0);
}

static long futex(_Atomic uint32_t *addr, int op, uint32_t val, const struct timespec *ts)
{
    return syscall(SYS_futex, (uint32_t *)addr, op, val, ts, NULL, 0);
}

/* Wake the NIC thread of a slot: bump its doorbell, and enter the kernel only when it sleeps.
 * The futex is shared between processes (no FUTEX_PRIVATE_FLAG). */
void emu_nic_kick(uint32_t slot)
{
    struct emu_nic_slot *n = &emu_fabric()->nics[slot % EMU_NIC_SLOTS];
    atomic_fetch_add(&n->doorbell, 1);
    if (atomic_load(&n->sleeping)) futex(&n->doorbell, FUTEX_WAKE, 1, NULL);
}

void emu_nic_sleep(int slot, uint32_t seq, uint64_t ns)
{
    struct emu_nic_slot *n = &emu_fabric()->nics[slot];
    atomic_store(&n->sleeping, 1);
    if (atomic_load(&n->doorbell) == seq) {
        struct timespec ts = { (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) };
        futex(&n->doorbell, FUTEX_WAIT, seq, &ts);
    }
    atomic_store(&n->sleeping, 0);
}

void emu_qp_seg_name(uint32_t qpn, char *buf, size_t len)
{
    snprintf(buf, len, "/zinc-ibemu-%s-qp%06x", emu_config()->fabric, qpn);
}

static uint32_t slot_qpn(uint32_t slot, uint32_t gen)
{
    return ((gen & 0xfff) << 12) | slot;
}

/* A QP number: a free directory slot (or one whose owner died, whose segment name is removed
 * then) and the slot's next generation, so a stale QP number never names a new QP. */
int emu_qp_slot_alloc(uint32_t *qpn)
{
    struct emu_fabric *f = emu_fabric();
    static _Atomic uint32_t start = 1;
    int32_t me = getpid();
    uint32_t first = atomic_fetch_add(&start, 7) % (EMU_QP_SLOTS - 1);
    for (uint32_t i = 0; i < EMU_QP_SLOTS - 1; i++) {
        uint32_t s = 1 + (first + i) % (EMU_QP_SLOTS - 1);
        int32_t pid = atomic_load(&f->qps[s].pid);
        int stale = pid != 0 && emu_pid_dead(pid);
        if ((pid != 0 && !stale) || !atomic_compare_exchange_strong(&f->qps[s].pid, &pid, me))
            continue;
        if (stale) {
            char name[128];
            emu_qp_seg_name(slot_qpn(s, atomic_load(&f->qps[s].gen)), name, sizeof(name));
            shm_unlink(name);
        }
        uint32_t gen = atomic_fetch_add(&f->qps[s].gen, 1) + 1;
        *qpn = slot_qpn(s, gen);
        return 0;
    }
    errno = ENOSPC;
    return -1;
}

void emu_qp_slot_free(uint32_t qpn)
{
    atomic_store(&emu_fabric()->qps[qpn & 0xfff].pid, 0);
}

/* Remove the segments of QPs whose owner died, so that /dev/shm does not fill up across test
 * runs that kill processes. */
void emu_reclaim_dead(void)
{
    struct emu_fabric *f = emu_fabric();
    for (uint32_t s = 1; s < EMU_QP_SLOTS; s++) {
        int32_t pid = atomic_load(&f->qps[s].pid);
        if (pid == 0 || !emu_pid_dead(pid)) continue;
        if (!atomic_compare_exchange_strong(&f->qps[s].pid, &pid, 0)) continue;
        char name[128];
        emu_qp_seg_name(slot_qpn(s, atomic_load(&f->qps[s].gen)), name, sizeof(name));
        shm_unlink(name);
    }
}

/* The owner of each QP segment holds a write lock on it for its lifetime; the kernel drops it
 * when the owner exits, even while the owner is still an unreaped zombie. POSIX locks never
 * conflict with the caller's own, so a segment of this process is checked by pid. */
int emu_seg_owner_alive(int fd, const struct emu_qp_seg *seg)
{
    if (atomic_load(&seg->pid) == getpid()) return 1;
    struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0 };
    if (fcntl(fd, F_GETLK, &fl) != 0) return 0;
    return fl.l_type != F_UNLCK;
}

/* ---------------------------------------------------------------------------------------
 * Rings
 * ------------------------------------------------------------------------------------- */
static uint64_t pkt_bytes(uint32_t payload)
{
    return ((uint64_t)sizeof(struct emu_pkt) + payload + 63) & ~(uint64_t)63;
}

struct emu_pkt *emu_ring_reserve(struct emu_qp_seg *seg, struct emu_ring *r, uint32_t n,
                                 uint64_t *new_head)
{
    uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
    uint64_t tail = atomic_load_explicit(&r->tail, memory_order_acquire);
    uint64_t need = pkt_bytes(n);
    uint64_t pos = head % r->size, to_end = r->size - pos;
    uint8_t *data = emu_ring_data(seg, r);
    if (need > to_end) {
        if (head - tail + to_end + need > r->size) return NULL;
        struct emu_pkt *pad = (struct emu_pkt *)(data + pos);
        pad->type = PKT_PAD;
        pad->len = (uint32_t)to_end;
        head += to_end;
        pos = 0;
    } else if (head - tail + need > r->size) {
        return NULL;
    }
    *new_head = head + need;
    return (struct emu_pkt *)(data + pos);
}

void emu_ring_publish(struct emu_ring *r, uint64_t new_head)
{
    atomic_store_explicit(&r->head, new_head, memory_order_release);
}

struct emu_pkt *emu_ring_peek(struct emu_qp_seg *seg, struct emu_ring *r)
{
    uint64_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
    uint64_t head = atomic_load_explicit(&r->head, memory_order_acquire);
    uint8_t *data = emu_ring_data(seg, r);
    while (tail != head) {
        struct emu_pkt *p = (struct emu_pkt *)(data + tail % r->size);
        if (p->type != PKT_PAD) return p;
        tail += p->len;
        atomic_store_explicit(&r->tail, tail, memory_order_release);
    }
    return NULL;
}

void emu_ring_pop(struct emu_ring *r, const struct emu_pkt *p)
{
    uint64_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
    atomic_store_explicit(&r->tail, tail + pkt_bytes(p->len), memory_order_release);
}

void emu_ring_discard(struct emu_ring *r)
{
    atomic_store_explicit(&r->tail, atomic_load_explicit(&r->head, memory_order_acquire),
                          memory_order_release);
}
