/* The GPU algorithms and their selection (gpu.h); the kernels are in src/device. */
#include "gpu.h"
#include "abi/dev_abi.h"

#include <math.h>
#include <string.h>

/* Registered buffers go zero-copy by default for allreduces up to ZC_MAX_BYTES and for
 * reducescatter blocks above ZC_RS_MIN_BYTES (see zerocopy_cost). */
#define ZC_MAX_BYTES    ((size_t)16 << 20)
#define ZC_RS_MIN_BYTES ((size_t)2 << 20)

/* LL carries at most 512 KB unless forced (ZINC_PROTO=LL). Measured on 4 H200 (procs): LL
 * 19.5 us at 512 KB against two-shot 26.8, even at 1 MB (28.7 against 28.1). */
#define LL_MAX_BYTES ((size_t)512 * 1024)

/* Without LL, one-shot (everyone reduces everything) up to this size, two-shot (reduce-scatter
 * + allgather) above. */
#define ONESHOT_MAX_BYTES ((size_t)256 * 1024)

/* Across hosts with a FIFO to every peer, one-shot up to this size: one net hop where the ring
 * takes 2(n-1) in turn, each a round through both proxies. Measured on 2 H200 as 2 "hosts"
 * over the socket net on loopback (2026-11-27): 8 B 28 us against the ring's 44 (NCCL 35),
 * 32 KB 47 against 61, 128 KB 84 against 86. */
#define NET_ONESHOT_MAX_BYTES ((size_t)32 * 1024)

static int proto_is(const struct zn_gpu_call *c, const char *p)
{
    return c->force_proto && !strcmp(c->force_proto, p);
}

/* LL fits the call: no channel more than its LL buffer holds, at most LL_MAX_BYTES unless
 * forced, and not with ZINC_PROTO=SIMPLE. */
static int ll_fits(const struct zn_gpu_call *c)
{
    size_t ll_max = (size_t)c->max_ch * (ZN_DEV_LL_BYTES / 2);
    if (ll_max > LL_MAX_BYTES && !proto_is(c, "LL")) ll_max = LL_MAX_BYTES;
    return c->bytes <= ll_max && !proto_is(c, "SIMPLE");
}

/* Channels for moving `bytes` per rank: one per `per` bytes, up to the communicator's maximum
 * (spreading even a 1 MB call over many SMs is what keeps NVLink busy); the same on every rank
 * since it depends only on the call. */
static int channels_for(const struct zn_gpu_call *c, size_t bytes, size_t per)
{
    size_t n = bytes / per + (bytes % per != 0); /* bytes + per - 1 could wrap */
    if (n < 1) n = 1;
    if (n > (size_t)c->max_ch) n = (size_t)c->max_ch;
    return (int)n;
}

static int whole_channels(const struct zn_gpu_call *c)
{
    return channels_for(c, c->bytes, c->chunk);
}

/* The GPU kernel family of the call's collective (abi/coll_list.h): allreduce's own patterns,
 * one direct pattern each, or the send/recv kernel. */
static int kernel_of(const struct zn_gpu_call *c)
{
    return zn_coll_facts(c->coll)->kernel;
}

/* Allreduce patterns that split the vector into the ranks' pieces size channels per piece. */
static int piece_channels(const struct zn_gpu_call *c)
{
    if (kernel_of(c) != ZN_KERN_ALLREDUCE) return whole_channels(c);
    return channels_for(c, c->bytes / (size_t)c->nranks, c->chunk);
}

static int ll_channels(const struct zn_gpu_call *c)
{
    return channels_for(c, c->bytes, c->ll_chunk);
}

/* Channels for a ring-LL allreduce, or 0 if it does not fit: the kernel (allreduce_ring_ll in
 * device/coll_ring.cuh) keeps the n-1 hops of a channel's packets (16 bytes per 8 data bytes) in
 * one LL buffer, with channel ranges as channel_range() cuts them (multiples of 16 elements). */
static int ring_ll_channels(const struct zn_gpu_call *c)
{
    for (int nch = ll_channels(c);; nch *= 2) {
        if (nch > c->max_ch) nch = c->max_ch;
        size_t per = ((c->count + (size_t)nch - 1) / (size_t)nch + 15) / 16 * 16;
        size_t packets = (per * c->esize + 7) / 8;
        if ((size_t)(c->nranks - 1) * packets * 16 <= ZN_DEV_LL_BYTES) return nch;
        if (nch == c->max_ch) return 0;
    }
}

/* The patterns that reach every peer need every peer's arena: not in ring mode, and at most
 * ZN_DEV_MAX_RANKS ranks (they address peers by rank: abi/dev_abi.h). */
static int all_peers_mapped(const struct zn_gpu_call *c)
{
    return !(c->ring_mode && c->nranks > 1) && c->nranks <= ZN_DEV_MAX_RANKS;
}

/* --- zero-copy ------------------------------------------------------------------------- */

/* Registered buffers (NCCL's contract: then every rank's are). Not in place where the blocks
 * overlap (alltoall): a rank would overwrite a block its peer is still sending. Not PreMulSum: each
 * rank scales its own input by its own scalar, which zero-copy, reading the peers' inputs as they
 * are, cannot do. */
static int zerocopy_supports(const struct zn_gpu_call *c)
{
    if (c->ring_mode || c->nranks < 2 || !c->registered || c->premul) return 0;
    return !(c->in_place && zn_coll_in_place_overlaps(c->coll));
}

/* Zero-copy allreduce above the LL sizes up to 16 MB, zero-copy reducescatter for blocks above
 * 2 MB, the other collectives only when forced (ZINC_ALGO=zerocopy, which also forces it for
 * every size). Measured on 2 H200 (procs, float): allreduce 2 MB 22.0 us against 23.8 through
 * the FIFOs, 8 MB 41.7 against 43.0; at 32 MB and above the FIFO two-shot is faster (1 GB: 333
 * against 352 GB/s busbw), since zero-copy reads the peers' memory where the FIFOs only write
 * it; below 512 KB LL is faster (its two handshakes cost ~6 us). Reducescatter reads the
 * peers' inputs too but saves more: blocks of 8 MB 39.5 us against 44.7, 128 MB 424.6 against
 * 559.6 (NCCL -R 1: 561.8); 2 MB 19.5 against 18.2. Allgather (stores into the peers' outputs)
 * was no better than the FIFOs beyond noise (16 MB 36.6 against 36.4 us, 256 MB 437.8 against
 * 426.6). The crossovers are measured per collective, so they are named here. */
static double zerocopy_cost(const struct zn_gpu_call *c)
{
    int wins = c->coll == ZN_COLL_ALLREDUCE       ? !ll_fits(c) && c->bytes <= ZC_MAX_BYTES
               : c->coll == ZN_COLL_REDUCESCATTER ? c->bytes > ZC_RS_MIN_BYTES
                                                  : 0;
    return wins ? 0 : INFINITY;
}

/* --- ring ------------------------------------------------------------------------------ */

/* Small allreduces on a ring: LL packets forwarded along it (n-1 hops) instead of the 2(n-1)
 * fenced FIFO steps. */
static int ring_ll_supports(const struct zn_gpu_call *c)
{
    return c->nranks > 1 && c->nranks <= ZN_DEV_MAX_RANKS && kernel_of(c) == ZN_KERN_ALLREDUCE &&
           ll_fits(c) && ring_ll_channels(c) && !c->net;
}

static double ring_ll_cost(const struct zn_gpu_call *c)
{
    return c->ring_mode ? 0 : INFINITY;
}

static int ring_supports(const struct zn_gpu_call *c)
{
    return c->nranks > 1 && zn_gpu_ring_on_gpu(c->coll);
}

/* Ring mode (only neighbours mapped) has nothing else; with every peer mapped the ring runs
 * only when forced (ZINC_ALGO=ring). */
static double ring_cost(const struct zn_gpu_call *c)
{
    return c->ring_mode ? 1 : INFINITY;
}

/* --- allreduce: one-shot LL, one-shot, two-shot ----------------------------------------- */

static int oneshot_ll_supports(const struct zn_gpu_call *c)
{
    return kernel_of(c) == ZN_KERN_ALLREDUCE && all_peers_mapped(c) && ll_fits(c);
}

/* LL (flagged packets, no fences) wherever it fits. */
static double ll_cost(const struct zn_gpu_call *c)
{
    return 2;
}

static int allreduce_supports(const struct zn_gpu_call *c)
{
    return kernel_of(c) == ZN_KERN_ALLREDUCE && all_peers_mapped(c);
}

/* FIFO slots only, so also where some peers are net shadows (all_fifos). */
static int oneshot_supports(const struct zn_gpu_call *c)
{
    return kernel_of(c) == ZN_KERN_ALLREDUCE && (all_peers_mapped(c) || c->all_fifos);
}

/* Across hosts it beats the ring (cost 1 in ring mode) only while latency rules. */
static double oneshot_cost(const struct zn_gpu_call *c)
{
    if (c->net) return c->bytes <= NET_ONESHOT_MAX_BYTES ? 0.5 : 5;
    return c->bytes <= ONESHOT_MAX_BYTES ? 3 : 5;
}

static double twoshot_cost(const struct zn_gpu_call *c)
{
    return 4;
}

/* --- the other collectives: one direct pattern each, LL for small blocks ---------------- */

/* LL packets for small blocks: measured on 2 H200, procs, 32 B to 512 KB, 0.70-0.99x NCCL's
 * time where the FIFOs took up to 1.4x. */
static int direct_ll_supports(const struct zn_gpu_call *c)
{
    return kernel_of(c) == ZN_KERN_DIRECT && all_peers_mapped(c) && ll_fits(c);
}

/* FIFO slots only, so also where some peers are net shadows (all_fifos). */
static int direct_supports(const struct zn_gpu_call *c)
{
    return kernel_of(c) == ZN_KERN_DIRECT && (all_peers_mapped(c) || c->all_fifos);
}

static double direct_cost(const struct zn_gpu_call *c)
{
    return 3;
}

static const struct zn_gpu_algo gpu_zerocopy = {
    .name = "zerocopy",
    .label = "zero-copy (registered buffers)",
    .doc = "every collective on registered buffers: stores into the peers' receive buffers or "
           "reads their send buffers (default: allreduce past LL up to 16 MB, reducescatter "
           "blocks above 2 MB)",
    .registered = 1,
    .force = { "zerocopy", NULL },
    .supports = zerocopy_supports,
    .cost = zerocopy_cost,
    .channels = piece_channels,
    .dev_algo = ZN_DEV_ZEROCOPY,
};

static const struct zn_gpu_algo gpu_ring_ll = {
    .name = "ring_ll",
    .label = "ring LL",
    .doc = "allreduce up to the LL sizes as LL packets forwarded along the ring",
    .force = { "ring", NULL },
    .supports = ring_ll_supports,
    .cost = ring_ll_cost,
    .channels = ring_ll_channels,
    .dev_algo = ZN_DEV_RING_LL,
};

static const struct zn_gpu_algo gpu_ring = {
    .name = "ring",
    .label = "ring",
    .doc = "every collective through the ring neighbours' FIFOs (ring mode: allreduce, "
           "allgather, reducescatter, broadcast, reduce; the rest are staged)",
    .force = { "ring", NULL },
    .supports = ring_supports,
    .cost = ring_cost,
    .channels = piece_channels,
    .dev_algo = ZN_DEV_ALGO_RING,
};

static const struct zn_gpu_algo gpu_oneshot_ll = {
    .name = "oneshot_ll",
    .label = "one-shot LL",
    .doc = "allreduce up to 512 KB: LL packets to every peer, each rank reduces everything",
    .force = { "oneshot", NULL },
    .supports = oneshot_ll_supports,
    .cost = ll_cost,
    .channels = ll_channels,
    .dev_algo = ZN_DEV_ONESHOT_LL,
};

static const struct zn_gpu_algo gpu_oneshot = {
    .name = "oneshot",
    .label = "one-shot",
    .doc = "allreduce through the FIFOs, each rank reduces everything (default without LL up "
           "to 256 KB; across hosts with a FIFO to every peer up to 32 KB)",
    .force = { "oneshot", NULL },
    .supports = oneshot_supports,
    .cost = oneshot_cost,
    .channels = whole_channels,
    .dev_algo = ZN_DEV_ONESHOT,
};

static const struct zn_gpu_algo gpu_twoshot = {
    .name = "twoshot",
    .label = "two-shot",
    .doc = "allreduce through the FIFOs as reduce-scatter then allgather",
    .force = { "twoshot", NULL },
    .supports = allreduce_supports,
    .cost = twoshot_cost,
    .channels = piece_channels,
    .dev_algo = ZN_DEV_TWOSHOT,
};

/* --- reducescatter: pushing and reducing blocks --------------------------------------- */

/* Blocks (per rank) from which the split pattern is used. Measured on 2 H100 (procs, float,
 * zinc / NCCL time): blocks of 8 MB 47.5 us direct against 52.1 split (NCCL 54.5), 32 MB 161.5
 * against 151.3 (NCCL 169), 512 MB 2155 against 1939 (NCCL 1985). */
#define SPLIT_MIN_BYTES ((size_t)16 << 20)

/* Its kernel (reducescatter_split, device/coll.cu) is reducescatter's alone. */
static int split_supports(const struct zn_gpu_call *c)
{
    return c->coll == ZN_COLL_REDUCESCATTER && c->nranks > 1 && all_peers_mapped(c) && !c->net;
}

static double split_cost(const struct zn_gpu_call *c)
{
    return c->bytes >= SPLIT_MIN_BYTES ? 2.5 : INFINITY;
}

/* Two thread blocks per channel: half as many channels as the direct pattern, the same SMs. */
static int split_channels(const struct zn_gpu_call *c)
{
    return (whole_channels(c) + 1) / 2;
}

static const struct zn_gpu_algo gpu_split = {
    .name = "split",
    .label = "split push/reduce",
    .doc = "reducescatter on one host from 16 MB blocks: per channel one thread block pushes "
           "the windows to the peers while another reduces the windows that arrived",
    .force = { "split", NULL },
    .supports = split_supports,
    .cost = split_cost,
    .channels = split_channels,
    .dev_algo = ZN_DEV_SPLIT,
};

static const struct zn_gpu_algo gpu_direct_ll = {
    .name = "direct_ll",
    .label = "direct LL",
    .doc = "every collective but allreduce up to 512 KB blocks: LL packets to every peer",
    .force = { "oneshot", NULL },
    .supports = direct_ll_supports,
    .cost = ll_cost,
    .channels = ll_channels,
    .dev_algo = ZN_DEV_ONESHOT_LL,
};

static const struct zn_gpu_algo gpu_direct = {
    .name = "direct",
    .label = "direct",
    .doc = "every collective but allreduce: one direct pattern through the FIFOs",
    .force = { "oneshot", "twoshot" },
    .supports = direct_supports,
    .cost = direct_cost,
    .channels = whole_channels,
    .dev_algo = ZN_DEV_ONESHOT,
};

static const struct zn_gpu_algo *const gpu_algos[] = {
    &gpu_zerocopy, &gpu_ring_ll,   &gpu_ring,   &gpu_oneshot_ll, &gpu_oneshot,
    &gpu_twoshot,  &gpu_direct_ll, &gpu_direct, &gpu_split,
};
#define NGPU ((int)(sizeof(gpu_algos) / sizeof(gpu_algos[0])))

const struct zn_gpu_algo *const *zn_gpu_algo_list(int *count)
{
    *count = NGPU;
    return gpu_algos;
}

static int forced(const struct zn_gpu_algo *g, const char *f)
{
    for (int i = 0; f && i < ZN_GPU_FORCE_MAX; i++)
        if (g->force[i] && !strcmp(g->force[i], f)) return 1;
    return 0;
}

static const struct zn_gpu_algo *pick(const struct zn_gpu_call *c)
{
    const char *f = c->force_algo;
    /* Registering buffers asks for them: where a registered pattern is the default, it wins
     * over forcing a FIFO pattern. */
    for (int i = 0; i < NGPU; i++)
        if (gpu_algos[i]->registered && gpu_algos[i]->supports(c) &&
            (forced(gpu_algos[i], f) || isfinite(gpu_algos[i]->cost(c))))
            return gpu_algos[i];
    for (int i = 0; f && i < NGPU; i++)
        if (forced(gpu_algos[i], f) && gpu_algos[i]->supports(c)) return gpu_algos[i];
    const struct zn_gpu_algo *best = NULL;
    double best_cost = INFINITY;
    for (int i = 0; i < NGPU; i++) {
        if (!gpu_algos[i]->supports(c)) continue;
        double cost = gpu_algos[i]->cost(c);
        if (cost < best_cost) {
            best = gpu_algos[i];
            best_cost = cost;
        }
    }
    return best;
}

const struct zn_gpu_algo *zn_gpu_algo_select(const struct zn_gpu_call *c, int *nch)
{
    const struct zn_gpu_algo *g = pick(c);
    *nch = g ? g->channels(c) : 0;
    return g;
}

/* The list's ring column (abi/coll_list.h). */
int zn_gpu_ring_on_gpu(enum zn_coll c)
{
    return zn_coll_facts(c)->ring;
}

/* The collectives that are the sends and receives of their routes (the list's sendrecv column:
 * alltoall, gather, scatter) as the send/recv kernel (NCCL's scheme for them): each peer's FIFO
 * moves as fast as that peer takes it, with every slot of it in flight, where the direct
 * pattern waits for every peer's piece per step. Not in place where the blocks overlap
 * (alltoall: a block would be overwritten while it is still being sent): that one keeps the
 * direct pattern, whose steps read a window of every block before they write any. */
int zn_gpu_as_sendrecv(enum zn_coll c, int in_place)
{
    return zn_coll_facts(c)->sendrecv && !(in_place && zn_coll_in_place_overlaps(c));
}

/* The list's zc column: allreduce needs both; the collectives whose kernels store into their
 * destinations (allgather, alltoall, broadcast, scatter) the receive buffers; those that read
 * the peers' inputs (reducescatter, reduce, gather) the send buffers (device/coll_zc.cuh). */
int zn_gpu_zc_buffers(enum zn_coll c)
{
    return zn_coll_facts(c)->zc;
}
