#include "shm.h"
#include "clock.h"
#include "err.h"
#include "size.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#define SHM_MAGIC   0x7a6e7368u /* "znsh" */
#define SHM_VERSION 1
#define SHM_HDR     4096

struct shm_hdr {
    uint32_t magic;
    uint32_t version;
    uint64_t size;
    atomic_uint ready;
    atomic_uint mapped;
    uint32_t expected;
};
_Static_assert(sizeof(struct shm_hdr) <= SHM_HDR, "shm header fits its page");

/* The mapping's size: header page plus the user size in whole pages; -1 if that overflows or
 * exceeds what a file offset (off_t) can hold. */
static int total_size(size_t size, size_t *total)
{
    size_t t;
    if (zn_round_up(size, 4096, &t) != 0 || zn_add_size(t, SHM_HDR, &t) != 0 ||
        t > (size_t)INT64_MAX)
        return -1;
    *total = t;
    return 0;
}

ncclResult_t zn_shm_create(const char *name, size_t size, int nmappers, struct zn_shm_seg *seg)
{
    size_t total;
    if (total_size(size, &total) != 0)
        return zn_error(ncclInvalidArgument, ZN_SHM,
                        "shared-memory segment %s: size %zu bytes is too large to map", name, size);
    int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0 && errno == EEXIST) {
        /* Names carry the job's random magic, so this is a leftover of a killed job. */
        shm_unlink(name);
        fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
    }
    if (fd < 0)
        return zn_error(ncclSystemError, ZN_SHM, "shm_open(/dev/shm%s) failed: %s", name,
                        strerror(errno));
    /* posix_fallocate reserves the pages now: without it a full /dev/shm shows up later as a
     * SIGBUS in the middle of a collective. */
    int rc = posix_fallocate(fd, 0, (off_t)total);
    if (rc != 0) {
        struct statvfs vfs;
        unsigned long long avail = 0;
        if (statvfs("/dev/shm", &vfs) == 0) avail = (unsigned long long)vfs.f_bavail * vfs.f_frsize;
        close(fd);
        shm_unlink(name);
        if (rc == ENOSPC)
            return zn_error(ncclSystemError, ZN_SHM,
                            "/dev/shm is too small: zinc needs %zu bytes for segment %s but only "
                            "%llu bytes are free; enlarge /dev/shm (docker run --shm-size=...), "
                            "lower ZINC_SHM_SLOT_SIZE / ZINC_SHM_FIFO_SIZE, or set "
                            "ZINC_SHM_DISABLE=1",
                            total, name, avail);
        return zn_error(ncclSystemError, ZN_SHM, "cannot allocate %zu bytes in /dev/shm%s: %s",
                        total, name, strerror(rc));
    }
    void *map = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int err = errno;
    close(fd);
    if (map == MAP_FAILED) {
        shm_unlink(name);
        return zn_error(ncclSystemError, ZN_SHM, "mmap of /dev/shm%s (%zu bytes) failed: %s", name,
                        total, strerror(err));
    }
    struct shm_hdr *h = map;
    h->magic = SHM_MAGIC;
    h->version = SHM_VERSION;
    h->size = size;
    h->expected = (uint32_t)nmappers;
    atomic_store(&h->mapped, 1);
    atomic_store_explicit(&h->ready, 1, memory_order_release);
    if (nmappers <= 1) shm_unlink(name);

    memset(seg, 0, sizeof(*seg));
    seg->map = map;
    seg->map_size = total;
    seg->base = (char *)map + SHM_HDR;
    seg->size = size;
    seg->owner = 1;
    snprintf(seg->name, sizeof(seg->name), "%s", name);
    zn_trace(ZN_SHM, "created %s (%zu bytes, %d mappers)", name, total, nmappers);
    return ncclSuccess;
}

static void nap(void)
{
    struct timespec ts = { 0, 200000 };
    nanosleep(&ts, NULL);
}

int zn_shm_attach(const char *name, size_t size, int64_t deadline, const atomic_int *abort_flag,
                  struct zn_shm_seg *seg)
{
    size_t total;
    if (total_size(size, &total) != 0) return -EPROTO; /* no segment can be that large */
    int fd;
    for (;;) {
        fd = shm_open(name, O_RDWR | O_CLOEXEC, 0600);
        if (fd >= 0) {
            struct stat st;
            if (fstat(fd, &st) == 0 && (size_t)st.st_size >= total) break;
            close(fd);
        } else if (errno != ENOENT) {
            return -errno;
        }
        if (abort_flag && atomic_load(abort_flag)) return -ECANCELED;
        if (zn_now_ns() > deadline) return -ETIMEDOUT;
        nap();
    }
    void *map = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int err = errno;
    close(fd);
    if (map == MAP_FAILED) return -err;
    struct shm_hdr *h = map;
    while (!atomic_load_explicit(&h->ready, memory_order_acquire)) {
        if ((abort_flag && atomic_load(abort_flag)) || zn_now_ns() > deadline) {
            munmap(map, total);
            return abort_flag && atomic_load(abort_flag) ? -ECANCELED : -ETIMEDOUT;
        }
        nap();
    }
    if (h->magic != SHM_MAGIC || h->version != SHM_VERSION || h->size != size) {
        munmap(map, total);
        return -EPROTO;
    }
    if (atomic_fetch_add(&h->mapped, 1) + 1 == h->expected) shm_unlink(name);
    memset(seg, 0, sizeof(*seg));
    seg->map = map;
    seg->map_size = total;
    seg->base = (char *)map + SHM_HDR;
    seg->size = size;
    snprintf(seg->name, sizeof(seg->name), "%s", name);
    return 0;
}

void zn_shm_detach(struct zn_shm_seg *seg)
{
    if (!seg->map) return;
    if (seg->owner) {
        struct shm_hdr *h = seg->map;
        if (atomic_load(&h->mapped) < h->expected) shm_unlink(seg->name);
    }
    munmap(seg->map, seg->map_size);
    seg->map = NULL;
    seg->base = NULL;
}
