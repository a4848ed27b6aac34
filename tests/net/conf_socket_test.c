/*
 * net_conf_socket: the conformance suite on zinc's socket net, taken from the registry, plus
 * what only the socket net can be asked: a stranger on the listener is rejected and the
 * listener keeps serving, and the registry picks nets by name.
 */
#include "conformance.h"
#include "net/net_layer.h"
#include "net/socket_internal.h"
#include "net/socket_wire.h"
#include "util/clock.h"
#include "util/err.h"
#include "util/param.h"
#include "zt.h"

#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

static const struct zn_net *NET;

/* Waits end at a hang guard, never at an iteration count: on a loaded machine the helper
 * threads may not run for a long while (ctest's timeout is 120 s). */
#define GUARD_NS (30 * 1000000000ll)

/* A connection with the wrong magic, one with a malformed hello, and one with the right magic
 * and a MAC not made with the handle's key are closed; a real connection made after them is
 * accepted and carries data. */
ZT_TEST(stranger_rejected)
{
    char handle[NCCL_NET_HANDLE_MAXSIZE] = { 0 };
    void *lc = NULL;
    ZT_OK(NET->ops->listen(NET->ctx, 0, handle, &lc));
    struct zn_nsock_handle h;
    ZT_OK(zn_nsock_handle_decode(handle, sizeof(handle) - 8, &h));
    int bad[3];
    for (int k = 0; k < 3; k++) {
        ZT_OK(zn_sock_connect(&h.addr, zn_deadline_from_now(), NULL, &bad[k]));
        uint8_t hello[ZN_NSOCK_HELLO_LEN];
        struct zn_nsock_hello m = {
            .stream = 0, .nstreams = h.nstreams, .magic = h.magic ^ (k != 2), .conn_id = 7
        };
        zn_nsock_hello_encode(&m, h.key, hello);
        if (k == 1) memset(hello, 0xee, sizeof(hello)); /* not even a hello */
        if (k == 2) hello[70] ^= 1;                     /* knows the magic, not the key */
        ZT_OK(zn_sock_send_all(bad[k], hello, sizeof(hello), zn_deadline_from_now(), NULL));
    }
    void *s = NULL, *r = NULL;
    int closed[3] = { 0, 0, 0 };
    int64_t end = zn_now_ns() + GUARD_NS;
    while ((!s || !r || !closed[0] || !closed[1] || !closed[2]) && zn_now_ns() < end) {
        if (!s) ZT_OK(NET->ops->connect(NET->ctx, 0, handle, &s, NULL));
        if (!r) ZT_OK(NET->ops->accept(lc, &r, NULL));
        for (int k = 0; k < 3; k++) {
            char b;
            struct pollfd p = { .fd = bad[k], .events = POLLIN };
            if (!closed[k] && poll(&p, 1, 0) == 1 && read(bad[k], &b, 1) <= 0) closed[k] = 1;
        }
    }
    ZT_ASSERT(s && r);
    ZT_ASSERT(closed[0] && closed[1] && closed[2]);
    for (int k = 0; k < 3; k++) close(bad[k]);
    char msg[100] = "after the strangers", out[100] = { 0 };
    void *reqs[2] = { NULL, NULL };
    size_t cap = sizeof(out);
    char *o = out;
    ncclResult_t res = NET->ops->irecv(r, 1, (void **)&o, &cap, (int[]){ 2 }, NULL, NULL, &reqs[0]);
    if (res == ncclSuccess) res = NET->ops->isend(s, msg, sizeof(msg), 2, NULL, NULL, &reqs[1]);
    end = zn_now_ns() + GUARD_NS;
    for (int left = 2; res == ncclSuccess && left && zn_now_ns() < end;)
        for (int k = 0; k < 2 && res == ncclSuccess; k++) {
            int done = 0;
            if (!reqs[k]) continue;
            res = NET->ops->test(reqs[k], &done, NULL);
            if (done) reqs[k] = NULL, left--;
        }
    /* Close before any check: a request still pending would otherwise let a helper thread
     * write `out` after this frame is gone, corrupting whatever test runs next. */
    NET->ops->closeSend(s);
    NET->ops->closeRecv(r);
    NET->ops->closeListen(lc);
    ZT_OK(res);
    ZT_ASSERT(!reqs[0] && !reqs[1]);
    ZT_EQ_STR(out, msg);
}

/* The selection rules: by name, case-insensitive; an unknown name is an error naming it. */
ZT_TEST(select_by_name)
{
    const struct zn_net *n = NULL;
    setenv("ZINC_NET", "socket", 1);
    zn_params_reload();
    ZT_OK(zn_net_select(&n));
    ZT_EQ_STR(n->name, "Socket");
    setenv("ZINC_NET", "nonesuch", 1);
    zn_params_reload();
    ZT_ASSERT(zn_net_select(&n) != ncclSuccess);
    ZT_ASSERT(strstr(zn_last_error(), "nonesuch") != NULL);
    unsetenv("ZINC_NET");
    zn_params_reload();
}

/* A connection of which only some streams arrive is dropped once ZINC_TIMEOUT (1 s here)
 * has passed; the listener still serves afterwards. */
ZT_TEST(partial_connection_dropped)
{
    static const char *names[] = { "ZINC_TIMEOUT", "ZINC_SOCKET_NTHREADS",
                                   "ZINC_NSOCKS_PERTHREAD" };
    static const char *values[] = { "1", "1", "1" }; /* one data stream: two streams in all */
    char *saved[3];
    for (int i = 0; i < 3; i++) {
        const char *v = getenv(names[i]);
        saved[i] = v ? strdup(v) : NULL;
        setenv(names[i], values[i], 1);
    }
    zn_params_reload();
    char handle[NCCL_NET_HANDLE_MAXSIZE] = { 0 };
    void *lc = NULL;
    ZT_OK(NET->ops->listen(NET->ctx, 0, handle, &lc));
    struct zn_nsock_handle h;
    ZT_OK(zn_nsock_handle_decode(handle, sizeof(handle) - 8, &h));
    ZT_EQ_INT(h.nstreams, 1);
    int fd;
    ZT_OK(zn_sock_connect(&h.addr, zn_deadline_from_now(), NULL, &fd));
    uint8_t hello[ZN_NSOCK_HELLO_LEN];
    struct zn_nsock_hello m = { .stream = 0, .nstreams = 1, .magic = h.magic, .conn_id = 42 };
    zn_nsock_hello_encode(&m, h.key, hello);
    ZT_OK(zn_sock_send_all(fd, hello, sizeof(hello), zn_deadline_from_now(), NULL));
    void *r = NULL;
    int64_t start = zn_now_ns();
    int closed = 0;
    while (!closed && zn_now_ns() - start < 30000000000ll) { /* a hang guard, not a timing */
        ZT_OK(NET->ops->accept(lc, &r, NULL));
        ZT_ASSERT(r == NULL);
        char b;
        struct pollfd p = { .fd = fd, .events = POLLIN };
        if (poll(&p, 1, 1) == 1 && read(fd, &b, 1) <= 0) closed = 1;
    }
    ZT_ASSERT(closed);
    ZT_ASSERT(zn_now_ns() - start >= 1000000000ll); /* not before the deadline */
    close(fd);
    NET->ops->closeListen(lc);
    for (int i = 0; i < 3; i++) {
        if (saved[i])
            setenv(names[i], saved[i], 1);
        else
            unsetenv(names[i]);
        free(saved[i]);
    }
    zn_params_reload();
}

/* A virtual device of the one device is that device; merging two is refused. */
ZT_TEST(virtual_device)
{
    int d = -1;
    ncclNetVDeviceProps_t one = { .ndevs = 1, .devs = { 0 } };
    ZT_OK(NET->ops->makeVDevice(&d, &one));
    ZT_EQ_INT(d, 0);
    ncclNetVDeviceProps_t two = { .ndevs = 2, .devs = { 0, 0 } };
    ZT_ASSERT(NET->ops->makeVDevice(&d, &two) != ncclSuccess);
}

/* ZINC_SOCKET_NTHREADS=-1, the default: 2 helper threads where the process may run on 8 or more
 * CPUs, none below (checked on one CPU, then on the CPUs this test was given); other values are
 * taken as they are. */
ZT_TEST(helper_threads_default)
{
    const char *v = getenv("ZINC_SOCKET_NTHREADS");
    char *saved = v ? strdup(v) : NULL;
    cpu_set_t all, one;
    ZT_ASSERT(sched_getaffinity(0, sizeof(all), &all) == 0);
    int first = 0;
    while (!CPU_ISSET(first, &all)) first++;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    int nt = -1, ns = 0;
    unsetenv("ZINC_SOCKET_NTHREADS");
    zn_params_reload();
    ZT_ASSERT(sched_setaffinity(0, sizeof(one), &one) == 0);
    zn_nsock_config(&nt, &ns);
    ZT_ASSERT(sched_setaffinity(0, sizeof(all), &all) == 0);
    ZT_EQ_INT(nt, 0);
    zn_nsock_config(&nt, &ns);
    ZT_EQ_INT(nt, CPU_COUNT(&all) >= 8 ? 2 : 0);
    static const char *values[] = { "-1", "0", "5" };
    const int expect[] = { CPU_COUNT(&all) >= 8 ? 2 : 0, 0, 5 };
    for (int i = 0; i < 3; i++) {
        setenv("ZINC_SOCKET_NTHREADS", values[i], 1);
        zn_params_reload();
        zn_nsock_config(&nt, &ns);
        ZT_EQ_INT(nt, expect[i]);
    }
    if (saved)
        setenv("ZINC_SOCKET_NTHREADS", saved, 1);
    else
        unsetenv("ZINC_SOCKET_NTHREADS");
    free(saved);
    zn_params_reload();
}

int main(void)
{
    if (zn_net_select(&NET) != ncclSuccess) {
        fprintf(stderr, "no net: %s\n", zn_last_error());
        return 1;
    }
    if (NET->plugin_version != 0 || strcmp(NET->name, "Socket") != 0) {
        fprintf(stderr, "expected the built-in Socket net first, got %s (plugin v%d)\n", NET->name,
                NET->plugin_version);
        return 1;
    }
    int failed = nt_run_suite(NET->ops, NET->ctx, zn_last_error);
    static const struct zt_case cases[] = { ZT_CASE(stranger_rejected), ZT_CASE(select_by_name),
                                            ZT_CASE(virtual_device),
                                            ZT_CASE(partial_connection_dropped),
                                            ZT_CASE(helper_threads_default) };
    failed += zt_run(cases, (int)(sizeof(cases) / sizeof(cases[0])));
    return failed ? 1 : 0;
}
