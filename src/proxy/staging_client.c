/*
 * The proxy's staging client (see staging_client.h): a client of the process's proxy progress
 * thread.
 */
#include "staging_client.h"
#include "progress.h"
#include "util/cuda.h"
#include "util/clock.h"
#include "util/log.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

struct zn_staging_client {
    struct zn_staging_client_config cfg;
    struct zn_dev_doorbell *bell_host, *bell_dev;
    uint64_t *seq_dev; /* the GPU-side signal count (device memory: graphs replay it) */
    struct zn_proxy_progress_client client;
    int attached;
    pthread_mutex_t lock; /* guards descs: posters and the progress thread */
    void **descs;         /* by id; NULL = free */
    int ndescs;
    /* The progress thread's own: the descriptor being stepped (its doorbell signal is number
     * processed), and when the last one finished. */
    void *cur;
    uint64_t cur_id;
    uint64_t processed;
    int64_t last_run_ns;
};

/* The descriptor of id, or NULL if none is posted there. */
static void *desc_at(struct zn_staging_client *p, uint64_t id)
{
    pthread_mutex_lock(&p->lock);
    void *d = id < (uint64_t)p->ndescs ? p->descs[id] : NULL;
    pthread_mutex_unlock(&p->lock);
    return d;
}

/* The descriptor of signal `processed` finished: the gate kernel may let the stream go. */
static void finish(struct zn_staging_client *p, int keep)
{
    void *d = p->cur;
    p->cur = NULL;
    p->processed++;
    p->last_run_ns = zn_now_ns();
    __atomic_store_n(&p->bell_host->done, p->processed, __ATOMIC_RELEASE);
    if (keep || !d) return;
    pthread_mutex_lock(&p->lock);
    p->descs[p->cur_id] = NULL;
    pthread_mutex_unlock(&p->lock);
    p->cfg.ops->release(p->cfg.owner, d);
}

/* The progress thread's callback: take the next doorbell signal if none is in hand, and step
 * its descriptor. */
static int staging_progress(void *arg)
{
    struct zn_staging_client *p = arg;
    if (!p->cur) {
        if (__atomic_load_n(&p->bell_host->go, __ATOMIC_ACQUIRE) == p->processed) return 0;
        p->cur_id = p->bell_host->ring[p->processed % ZN_DEV_RING];
        p->cur = desc_at(p, p->cur_id);
        if (!p->cur) {
            finish(p, 1); /* nothing posted under that id: let the stream go */
            return 1;
        }
    }
    zn_log_rank = p->cfg.rank;
    zn_cuda_set_device(p->cfg.cuda_dev);
    int moved = 0, r = p->cfg.ops->step(p->cfg.owner, p->cur, &moved);
    if (r == ZN_STAGING_RUNNING) return moved;
    finish(p, r == ZN_STAGING_KEEP);
    return 1;
}

static void staging_dump(void *arg)
{
    struct zn_staging_client *p = arg;
    int posted = 0;
    pthread_mutex_lock(&p->lock);
    for (int i = 0; i < p->ndescs; i++) posted += p->descs[i] != NULL;
    pthread_mutex_unlock(&p->lock);
    uint64_t go = __atomic_load_n(&p->bell_host->go, __ATOMIC_ACQUIRE);
    zn_warn(ZN_PROXY,
            "proxy dump:  staging of rank %d (GPU %d): %llu of %llu doorbell signals run%s, %d "
            "descriptors posted, last run ended %.3f s ago",
            p->cfg.rank, p->cfg.cuda_dev, (unsigned long long)p->processed, (unsigned long long)go,
            p->cur ? " (one running)" : "", posted, (double)(zn_now_ns() - p->last_run_ns) / 1e9);
}

ncclResult_t zn_staging_client_create(const struct zn_staging_client_config *cfg,
                                      struct zn_staging_client **out)
{
    const struct zn_staging_client_ops *ops = cfg->ops;
    if (!ops || ops->size != sizeof(*ops) || !ops->step || !ops->release)
        return zn_error(ncclInternalError, ZN_PROXY,
                        "proxy operations table is incomplete or of another size");
    struct zn_staging_client *p = calloc(1, sizeof(*p));
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
    p->last_run_ns = zn_now_ns();
    p->client = (struct zn_proxy_progress_client){ .progress = staging_progress,
                                                   .dump = staging_dump,
                                                   .arg = p };
    zn_proxy_progress_add(&p->client);
    p->attached = 1;
    *out = p;
    return ncclSuccess;
fail:
    zn_staging_client_destroy(p);
    return res;
}

ncclResult_t zn_staging_client_post(struct zn_staging_client *p, void *desc, uint64_t *id)
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

struct zn_dev_doorbell *zn_staging_client_bell_dev(const struct zn_staging_client *p)
{
    return p->bell_dev;
}

uint64_t *zn_staging_client_seq_dev(const struct zn_staging_client *p)
{
    return p->seq_dev;
}

void zn_staging_client_destroy(struct zn_staging_client *p)
{
    if (!p) return;
    /* Once removed, staging_progress does not run again. */
    if (p->attached) zn_proxy_progress_remove(&p->client);
    for (int i = 0; i < p->ndescs; i++)
        if (p->descs[i]) p->cfg.ops->release(p->cfg.owner, p->descs[i]);
    free(p->descs);
    zn_cuda_free(p->seq_dev);
    zn_cuda_host_free(p->bell_host);
    pthread_mutex_destroy(&p->lock);
    free(p);
}
