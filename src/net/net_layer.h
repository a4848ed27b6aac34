/*
 * The net layer's internal interface: the registry of nets that zinc can use.
 *
 * Every net, built in or loaded from a plugin, is seen through one table of the newest ABI
 * version (ncclNet_t = ncclNet_v12_t, nccl_net.h); plugins that export an older version are
 * wrapped by adapters (plugin.c), as NCCL does. The registry is built once per process, in a
 * deterministic order: nets from the plugin library first (NCCL's order), then the built-in
 * nets of ZN_NET_BUILTINS. A net knows nothing of communicators or ranks; the layer above adds
 * rank and host to the errors it reports.
 */
#ifndef ZN_NET_NET_LAYER_H
#define ZN_NET_NET_LAYER_H

#include "net/nccl_net.h"

#include <stdint.h>

/* Built-in nets, in registry order (after plugin nets). The IB verbs net goes before socket. */
#if defined(ZINC_HAVE_IBVERBS) && ZINC_HAVE_IBVERBS
#define ZN_NET_BUILTINS(X) X(ib) X(socket)
#else
#define ZN_NET_BUILTINS(X) X(socket)
#endif

#define ZN_NET_MAX 8

struct zn_net {
    const ncclNet_t *ops; /* the v12 table (an adapter for older plugins) */
    const char *name;     /* ops->name */
    void *ctx;            /* the context init() returned when the registry probed the net */
    int ndev;             /* devices() at registration */
    int plugin_version;   /* 0: built in; N: loaded from a plugin's ncclNetPlugin_vN */
};

/* The nets usable in this process (those whose init succeeded and that have devices), loading
 * the plugin on first call. Never fails: a net or plugin that cannot be used is skipped with
 * one warning. */
int zn_net_count(void);
const struct zn_net *zn_net_get(int i);

/* A net the registry knows of but does not use, and why ("no RDMA device (...)", "init failed:
 * ...", "not built: ..."): built-in nets without devices, nets whose init failed, and built-in
 * nets left out of this build. In registry order; logged once when the registry is built. */
struct zn_net_unused {
    const char *name;
    int plugin_version; /* as in struct zn_net */
    char why[240];
};

int zn_net_unused_count(void);
const struct zn_net_unused *zn_net_unused_get(int i);

/* Why the net of that name (case-insensitive) is not used; NULL when it is used or unknown. */
const char *zn_net_why(const char *name);

/* The net named by ZINC_NET / NCCL_NET (case-insensitive), else the first of the registry.
 * Errors name the missing net and list the ones present. */
ncclResult_t zn_net_select(const struct zn_net **out);

/* Find a net by name (case-insensitive); NULL if absent. */
const struct zn_net *zn_net_find(const char *name);

/* The logger handed to nets' init(): NCCL's levels and subsystems mapped onto zn_log. */
void zn_net_logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
                   const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Built-in tables (one per entry of ZN_NET_BUILTINS). */
extern const ncclNet_t zn_net_socket;
extern const ncclNet_t zn_net_ib; /* src/net/ib*.c, built with rdma-core's headers */

/* Why the IB net has no usable port (no libibverbs, no RDMA device, no active port matching
 * ZINC_IB_HCA, ZINC_IB_DISABLE); NULL when it has one. Scans the devices on first call. */
const char *zn_net_ib_why(void);

/* ---------------------------------------------------------------------------------------
 * One-sided extension (zinc-internal). Beside the ncclNet_t ops, a net may let a sender write
 * straight into memory its peer registered, with no receive posted on the other side: the
 * peer describes a registration as a key (address, size, rkey) and sends it over (in band or
 * out of band), and the sender's writes go into that range only. This is not part of the
 * ncclNet_t ABI and libnccl-net-zinc.so does not export it; only zinc's own IB net has it
 * (src/net/ib_rma.c). Every call is made by the thread that drives the comm (user or proxy),
 * under the caller's lock, and none blocks.
 * ------------------------------------------------------------------------------------- */
struct zn_net_rkey {
    uint64_t addr; /* where the registered range starts, in the owner's address space */
    uint64_t size; /* bytes a peer may write from addr */
    uint32_t rkey;
    uint32_t pad;
};

struct zn_net_rma_ops {
    /* The key of [data, +size) of a registration (regMr on this comm; a recv comm's, for the
     * peer to write into). Fails if the range lies outside the registration. */
    ncclResult_t (*key)(void *comm, void *mhandle, void *data, size_t size,
                        struct zn_net_rkey *out);
    /* Write [src, +size) of a registration of this send comm into the peer's key at dst_off.
     * A range outside the key's size is refused (ncclInvalidArgument), nothing posted. The
     * request completes through the net's test(); *request NULL means try again. Writes of one
     * send comm go out on one queue pair and land in the order they were posted. */
    ncclResult_t (*write)(void *send_comm, void *mhandle, void *src, size_t size,
                          const struct zn_net_rkey *dst, uint64_t dst_off, void **request);
    /* The comm's sticky failure, if any; *closed set once the peer closed its end (it exited
     * or closed its comm). For a side that posts nothing and only watches memory. */
    ncclResult_t (*check)(void *comm, int *closed);
};

/* The one-sided extension of a net of the registry, or NULL when it has none. */
const struct zn_net_rma_ops *zn_net_rma(const struct zn_net *net);
extern const struct zn_net_rma_ops zn_net_ib_rma; /* src/net/ib_rma.c */

/* Plugin loading (plugin.c): dlopen NCCL_NET_PLUGIN (or libnccl-net.so), find the newest
 * ncclNetPlugin_vN, and return its table adapted to v12. 0 nets when there is no plugin. */
int zn_net_plugin_load(const ncclNet_t **tables, int *versions, int max);

#endif
