#include "proxy.h"
#include "util/cuda.h"
#include "util/clock.h"
#include "util/log.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if ZINC_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

struct zn_proxy {
    struct zn_proxy_config cfg;
    struct zn_dev_doorbell *bell_host, *bell_dev;
    uint64_t *seq_dev; /* the GPU-side signal count (device memory: graphs replay it) */
    pthread_t thread;
    int thread_started;
    atomic_int stop;
    pthread_mutex_t lock; /* guards descs: posters and the progress thread */
    void **descs;         /* by id; NULL = free */
    int ndescs;
    uint64_t processed;          /* doorbell signals handled (the dump's step counter) */
    _Atomic int64_t last_run_ns; /* when the last descriptor finished */
    struct zn_proxy *next;       /* in the list the state dump walks */
};

/* Every staging thread of the process, for zn_proxy_staging_dump. */
static pthread_mutex_t all_lock = PTHREAD_MUTEX_INITIALIZER;
static struct zn_proxy *all;

/* The descriptor of id, or NULL if none is posted there. */
static void *desc_at(struct zn_proxy *p, uint64_t id)
{
    pthread_mutex_lock(&p->lock);
    void *d = id < (uint64_t)p->ndescs ? p->descs[id] : NULL;
    pthread_mutex_unlock(&p->lock);
    return d;
}

static void *progress_main(void *arg)
{
    struct zn_proxy *p = arg;
    zn_log_rank = p->cfg.rank;
#if ZINC_HAVE_CUDA
    cudaSetDevice(p->cfg.cuda_dev);
#endif
    uint64_t processed = 0;
    int idle = 0;
    while (!atomic_load(&p->stop)) {
        uint64_t go = p->bell_host->go;
        if (processed == go) {
            /* Spin a little (a collective right after another is common), then nap. */
            if (++idle > 2000) {
                struct timespec ts = { 0, 20000 };
                nanosleep(&ts, NULL);
            }
            continue;
        }
        idle = 0;
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        uint64_t id = p->bell_host->ring[processed % ZN_DEV_RING];
        void *d = desc_at(p, id);
        int keep = d ? p->cfg.ops->run(p->cfg.owner, d) : 1;
        processed++;
        __atomic_store_n(&p->processed, processed, __ATOMIC_RELAXED);
        atomic_store(&p->last_run_ns, zn_now_ns());
        __atomic_thread_fence(__ATOMIC_RELEASE);
        p->bell_host->done = processed;
        if (!keep) {
            pthread_mutex_lock(&p->lock);
            p->descs[id] = NULL;
            pthread_mutex_unlock(&p->lock);
            p->cfg.ops->release(p->cfg.owner, d);
        }
    }
    return NULL;
}

ncclResult_t zn_proxy_create(const struct zn_proxy_config *cfg, struct zn_proxy **out)
{
    const struct zn_proxy_ops *ops = cfg->ops;
    if (!ops || ops->size != sizeof(*ops) || !ops->run || !ops->release)
        return zn_error(ncclInternalError, ZN_PROXY,
                        "proxy operations table is incomplete or of another size");
    struct zn_proxy *p = calloc(1, sizeof(*p));
    if (!p) return zn_error(ncclSystemError, ZN_PROXY, "out of memory");
    p->cfg = *cfg;
    pthread_mutex_init(&p->lock, NULL);
    void *bell_dev = NULL;
    ncclResult_t res;
    ZN_CHECK_GOTO(zn_cuda_host_alloc((void **)&p->bell_host, &bell_dev, sizeof(*p->bell_host)), res,
                  fail);
    p->bell_dev = bell_dev;
    ZN_CHECK_GOTO(zn_cuda_malloc((void **)&p->seq_dev, sizeof(uint64_t), "the staging counter"),
                  res, fail);
    ZN_CHECK_GOTO(zn_cuda_memset(p->seq_dev, 0, sizeof(uint64_t)), res, fail);
    if (pthread_create(&p->thread, NULL, progress_main, p) != 0) {
        res = zn_error(ncclSystemError, ZN_PROXY, "cannot start the proxy thread");
        goto fail;
    }
    p->thread_started = 1;
    atomic_store(&p->last_run_ns, zn_now_ns());
    pthread_mutex_lock(&all_lock);
    p->next = all;
    all = p;
    pthread_mutex_unlock(&all_lock);
    *out = p;
    return ncclSuccess;
fail:
    zn_proxy_destroy(p);
    return res;
}

ncclResult_t zn_proxy_post(struct zn_proxy *p, void *desc, uint64_t *id)
{
    pthread_mutex_lock(&p->lock);
    int slot = -1;
    for (int i = 0; i < p->ndescs && slot < 0; i++)
        if (!p->descs[i]) slot = i;
    if (slot < 0) {
        int cap = p->ndescs ? p->ndescs * 2 : 16;
        void **n = realloc(p->descs, (size_t)cap * sizeof(*n));
        if (!n) {
            pthread_mutex_unlock(&p->lock);
            return zn_error(ncclSystemError, ZN_PROXY, "out of memory");
        }
        memset(n + p->ndescs, 0, (size_t)(cap - p->ndescs) * sizeof(*n));
        slot = p->ndescs;
        p->descs = n;
        p->ndescs = cap;
    }
    p->descs[slot] = desc;
    pthread_mutex_unlock(&p->lock);
    *id = (uint64_t)slot;
    return ncclSuccess;
}

void zn_proxy_staging_dump(void)
{
    int64_t now = zn_now_ns();
    pthread_mutex_lock(&all_lock);
    for (struct zn_proxy *p = all; p; p = p->next) {
        int posted = 0;
        pthread_mutex_lock(&p->lock);
        for (int i = 0; i < p->ndescs; i++) posted += p->descs[i] != NULL;
        pthread_mutex_unlock(&p->lock);
        uint64_t go = __atomic_load_n(&p->bell_host->go, __ATOMIC_ACQUIRE);
        uint64_t done = __atomic_load_n(&p->processed, __ATOMIC_RELAXED);
        zn_warn(ZN_PROXY,
                "proxy dump:  staging thread of rank %d (GPU %d): %llu of %llu doorbell "
                "signals run, %d descriptors posted, last run ended %.3f s ago",
                p->cfg.rank, p->cfg.cuda_dev, (unsigned long long)done, (unsigned long long)go,
                posted, (double)(now - atomic_load(&p->last_run_ns)) / 1e9);
    }
    pthread_mutex_unlock(&all_lock);
}

struct zn_dev_doorbell *zn_proxy_bell_dev(const struct zn_proxy *p)
{
    return p->bell_dev;
}

uint64_t *zn_proxy_seq_dev(const struct zn_proxy *p)
{
    return p->seq_dev;
}

void zn_proxy_destroy(struct zn_proxy *p)
{
    if (!p) return;
    pthread_mutex_lock(&all_lock);
    for (struct zn_proxy **q = &all; *q; q = &(*q)->next)
        if (*q == p) {
            *q = p->next;
            break;
        }
    pthread_mutex_unlock(&all_lock);
    if (p->thread_started) {
        atomic_store(&p->stop, 1);
        pthread_join(p->thread, NULL);
    }
    for (int i = 0; i < p->ndescs; i++)
        if (p->descs[i]) p->cfg.ops->release(p->cfg.owner, p->descs[i]);
    free(p->descs);
    zn_cuda_free(p->seq_dev);
    zn_cuda_host_free(p->bell_host);
    pthread_mutex_destroy(&p->lock);
    free(p);
}
