/* Unique ids: a root address, a 64-bit job magic and the job secret (bootstrap.h). */
#include "bootstrap.h"
#include "util/err.h"
#include "util/hmac.h"
#include "util/log.h"
#include "util/param.h"

#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/random.h>

#define ZN_ID_VERSION 2

/* FNV-1a: a stable 64-bit hash, so every rank derives the same magic from ZINC_COMM_ID. */
static uint64_t fnv1a(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
    return h;
}

/* The secret of a job that meets at a fixed address: ZINC_JOB_SECRET, hashed so that any
 * string will do. Without it, say once that the job's connections prove nothing. */
static void secret_from_env(struct zn_unique_id *id)
{
    const char *s = zn_params()->job_secret;
    if (*s) {
        static const char label[] = "zinc-job-secret:";
        struct zn_sha256 h;
        zn_sha256_init(&h);
        zn_sha256_update(&h, label, sizeof(label) - 1);
        zn_sha256_update(&h, s, strlen(s));
        zn_sha256_final(&h, id->secret);
        id->flags |= ZN_ID_SECRET;
        return;
    }
    static atomic_int told;
    if (!atomic_exchange(&told, 1))
        zn_info(ZN_BOOT, "bootstrap: no ZINC_JOB_SECRET: anyone who knows the rendezvous address "
                         "can join or disturb this job (zinc-run sets one; other launchers can "
                         "pass one)");
}

/* For a root of this process: a random magic and job secret, and this host's bootstrap
 * address with port 0 (the root takes an ephemeral one). */
static ncclResult_t draw_local(struct zn_unique_id *id, union zn_sockaddr *addr)
{
    if (getrandom(&id->magic, sizeof(id->magic), 0) != sizeof(id->magic))
        return zn_error(ncclSystemError, ZN_BOOT, "getrandom failed: %s", strerror(errno));
    id->magic |= 1; /* never 0, which marks an id that was never filled */
    if (getrandom(id->secret, sizeof(id->secret), 0) != sizeof(id->secret))
        return zn_error(ncclSystemError, ZN_BOOT, "getrandom failed: %s", strerror(errno));
    id->flags |= ZN_ID_SECRET;
    char ifname[64];
    int rc = zn_sock_local_addr(addr, ifname, sizeof(ifname));
    if (rc)
        return zn_error(ncclSystemError, ZN_BOOT,
                        "no network interface matches ZINC_SOCKET_IFNAME=\"%s\" (%s)",
                        zn_params()->socket_ifname, strerror(-rc));
    if (addr->sa.sa_family == AF_INET6)
        addr->in6.sin6_port = 0;
    else
        addr->in4.sin_port = 0;
    return ncclSuccess;
}

/* use_env: 1 ZINC_COMM_ID, 2 fixed_addr, 0 neither (a root of this process). */
static ncclResult_t make_id(ncclUniqueId *out, int use_env, const char *fixed_addr)
{
    struct zn_unique_id id;
    memset(&id, 0, sizeof(id));
    id.version = ZN_ID_VERSION;
    const char *env = use_env == 1 ? zn_params()->comm_id : use_env == 2 ? fixed_addr : "";
    union zn_sockaddr addr;
    if (*env) {
        int rc = zn_sockaddr_parse(env, &addr);
        if (rc)
            return zn_error(
                ncclInvalidArgument, ZN_BOOT, "%s=\"%s\" is not a host:port address (%s)",
                use_env == 1 ? "ZINC_COMM_ID/NCCL_COMM_ID" : "root address", env, strerror(-rc));
        id.magic = fnv1a(env) | 1;
        id.rank0_hosts_root = 1;
        secret_from_env(&id);
    } else {
        ZN_CHECK(draw_local(&id, &addr));
        ZN_CHECK(zn_boot_root_start(&addr, id.magic, id.secret, &addr));
    }
    memcpy(id.root_addr, &addr, sizeof(addr));
    memset(out, 0, sizeof(*out));
    memcpy(out->internal, &id, sizeof(id));
    return ncclSuccess;
}

ncclResult_t zn_boot_get_unique_id(ncclUniqueId *out)
{
    return make_id(out, 1, NULL);
}

ncclResult_t zn_boot_get_private_id(ncclUniqueId *out)
{
    return make_id(out, 0, NULL);
}

ncclResult_t zn_boot_id_from_addr(const char *hostport, ncclUniqueId *out)
{
    return make_id(out, 2, hostport);
}

ncclResult_t zn_boot_get_grow_id(int parent_nranks, ncclUniqueId *out, struct zn_boot_root **root)
{
    struct zn_unique_id id;
    memset(&id, 0, sizeof(id));
    id.version = ZN_ID_VERSION;
    union zn_sockaddr addr;
    ZN_CHECK(draw_local(&id, &addr));
    struct zn_boot_root *h;
    ZN_CHECK(zn_boot_root_start_grow(&addr, id.magic, id.secret, &addr, &h));
    memcpy(id.root_addr, &addr, sizeof(addr));
    struct zn_grow_tail tail = { .tag = ZN_GROW_TAG, .parent_nranks = parent_nranks };
    memset(out, 0, sizeof(*out));
    memcpy(out->internal, &id, sizeof(id));
    memcpy(out->internal + sizeof(id), &tail, sizeof(tail));
    *root = h;
    return ncclSuccess;
}

int zn_boot_grow_id_parent(const ncclUniqueId *uid)
{
    struct zn_unique_id id;
    struct zn_grow_tail tail;
    memcpy(&id, uid->internal, sizeof(id));
    memcpy(&tail, uid->internal + sizeof(id), sizeof(tail));
    union zn_sockaddr root;
    memset(&root, 0, sizeof(root));
    memcpy(&root, id.root_addr, sizeof(root));
    int family = root.sa.sa_family;
    if (tail.tag != ZN_GROW_TAG || tail.parent_nranks < 1 || id.magic == 0 || id.rank0_hosts_root ||
        (family != AF_INET && family != AF_INET6))
        return -1;
    return tail.parent_nranks;
}
