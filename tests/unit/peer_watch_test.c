/* Unit tests of the peer watch (transport/peer.h): a peer on this host is reported dead once its
 * process exited, and never while it lives, even when the watch's descriptor was closed or
 * replaced behind its back (a double close elsewhere in the process), or when the peer is in
 * another pid namespace, where its pid names another process. */
#include "transport/peer.h"
#include "util/param.h"
#include "zt.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

/* A child process that reports its peer info and lives until its pipe closes. */
struct child {
    pid_t pid;
    int keep; /* write end: closing it ends the child */
    struct zn_peer_info info[2];
    struct zn_tctx ctx;
};

static int child_start(struct child *c)
{
    int info[2], keep[2];
    if (pipe(info) || pipe(keep)) return -1;
    c->pid = fork();
    if (c->pid < 0) return -1;
    if (c->pid == 0) {
        struct zn_peer_info me;
        close(keep[1]);
        zn_peer_info_local(&me);
        me.rank = 1;
        if (write(info[1], &me, sizeof(me)) != (ssize_t)sizeof(me)) _exit(1);
        char b;
        while (read(keep[0], &b, 1) > 0) {
        }
        _exit(0);
    }
    close(info[1]);
    close(keep[0]);
    c->keep = keep[1];
    zn_peer_info_local(&c->info[0]);
    ssize_t n = read(info[0], &c->info[1], sizeof(c->info[1]));
    close(info[0]);
    c->ctx = (struct zn_tctx){ .rank = 0, .nranks = 2, .peers = c->info };
    return n == (ssize_t)sizeof(c->info[1]) ? 0 : -1;
}

/* End the child and wait until it exited, leaving it a zombie (WNOWAIT). */
static void child_exit(struct child *c)
{
    close(c->keep);
    siginfo_t si;
    waitid(P_PID, (id_t)c->pid, &si, WEXITED | WNOWAIT);
}

/* The descriptor of this process that is a pidfd of pid (-1 if none). */
static int find_pidfd(pid_t pid)
{
    char path[64], line[128];
    for (int fd = 3; fd < 1024; fd++) {
        snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        int p = 0, found = 0;
        while (!found && fgets(line, sizeof(line), f))
            found = sscanf(line, "Pid: %d", &p) == 1 && p == pid;
        fclose(f);
        if (found) return fd;
    }
    return -1;
}

ZT_TEST(alive_then_exited)
{
    struct child c;
    ZT_ASSERT(child_start(&c) == 0);
    struct zn_peer_watch *w = NULL;
    ZT_ASSERT(zn_peer_watch_create(&c.ctx, &w) == ncclSuccess);
    for (int i = 0; i < 100; i++) ZT_EQ_INT(zn_peer_dead(w, 1), 0);
    ZT_EQ_INT(zn_peer_dead(w, 0), 0); /* this rank is not watched */
    child_exit(&c);
    ZT_EQ_INT(zn_peer_dead(w, 1), 1); /* a zombie is dead */
    waitpid(c.pid, NULL, 0);
    ZT_EQ_INT(zn_peer_dead(w, 1), 1); /* and so is a reaped process */
    zn_peer_watch_destroy(w);
}

/* The pidfd replaced by a readable pipe (old code: "dead" at once), then the live child must
 * stay alive; the watch must not close the descriptor it no longer owns. */
ZT_TEST(descriptor_replaced)
{
    struct child c;
    ZT_ASSERT(child_start(&c) == 0);
    struct zn_peer_watch *w = NULL;
    ZT_ASSERT(zn_peer_watch_create(&c.ctx, &w) == ncclSuccess);
    ZT_EQ_INT(zn_peer_dead(w, 1), 0); /* the first question opens the pidfd */
    int fd = find_pidfd(c.pid);
    ZT_ASSERT(fd >= 0);
    int p[2];
    ZT_ASSERT(pipe(p) == 0);
    ZT_ASSERT(write(p[1], "x", 1) == 1);
    ZT_ASSERT(dup2(p[0], fd) == fd);
    for (int i = 0; i < 10; i++) ZT_EQ_INT(zn_peer_dead(w, 1), 0);
    zn_peer_watch_destroy(w);
    ZT_ASSERT(fcntl(fd, F_GETFD) >= 0); /* still open: it was not the watch's any more */
    close(fd);
    close(p[0]);
    close(p[1]);
    child_exit(&c);
    waitpid(c.pid, NULL, 0);
}

/* The pidfd closed elsewhere (poll reports POLLNVAL): not a death. */
ZT_TEST(descriptor_closed)
{
    struct child c;
    ZT_ASSERT(child_start(&c) == 0);
    struct zn_peer_watch *w = NULL;
    ZT_ASSERT(zn_peer_watch_create(&c.ctx, &w) == ncclSuccess);
    ZT_EQ_INT(zn_peer_dead(w, 1), 0); /* the first question opens the pidfd */
    int fd = find_pidfd(c.pid);
    ZT_ASSERT(fd >= 0);
    close(fd);
    for (int i = 0; i < 10; i++) ZT_EQ_INT(zn_peer_dead(w, 1), 0);
    zn_peer_watch_destroy(w);
    child_exit(&c);
    waitpid(c.pid, NULL, 0);
}

/* A peer in another pid namespace: its pid names some other process here (the one of this test
 * that exits), which must not be watched in its place. */
ZT_TEST(other_pid_namespace)
{
    struct child c;
    ZT_ASSERT(child_start(&c) == 0);
    ZT_ASSERT(c.info[0].pid_ns != 0 && c.info[1].pid_ns == c.info[0].pid_ns);
    c.info[1].pid_ns++;
    struct zn_peer_watch *w = NULL;
    ZT_ASSERT(zn_peer_watch_create(&c.ctx, &w) == ncclSuccess);
    ZT_EQ_INT(zn_peer_dead(w, 1), 0);
    ZT_EQ_INT(find_pidfd(c.pid), -1);
    child_exit(&c);
    ZT_EQ_INT(zn_peer_dead(w, 1), 0);
    zn_peer_watch_destroy(w);
    waitpid(c.pid, NULL, 0);
}

/* ZINC_HOSTID as a list: rank r gets the id at r mod its length; a plain id is every rank's. */
ZT_TEST(host_id_list)
{
    setenv("ZINC_HOSTID", "h0,h0,h1,h1", 1);
    zn_params_reload();
    uint64_t r0 = zn_host_hash_rank(0), r1 = zn_host_hash_rank(1), r2 = zn_host_hash_rank(2);
    ZT_ASSERT(r0 == r1);
    ZT_ASSERT(r0 != r2);
    ZT_ASSERT(zn_host_hash_rank(3) == r2);
    ZT_ASSERT(zn_host_hash_rank(4) == r0); /* wraps */
    setenv("ZINC_HOSTID", "h1", 1);
    zn_params_reload();
    ZT_ASSERT(zn_host_hash_rank(0) == r2); /* the same id hashes alike, listed or not */
    ZT_ASSERT(zn_host_hash_rank(5) == r2);
    ZT_ASSERT(zn_host_hash() == r2);
    unsetenv("ZINC_HOSTID");
    zn_params_reload();
    ZT_ASSERT(zn_host_hash_rank(1) == zn_host_hash());
    ZT_ASSERT(zn_host_hash() != r2);
}

ZT_MAIN(ZT_CASE(host_id_list), ZT_CASE(alive_then_exited), ZT_CASE(descriptor_replaced),
        ZT_CASE(descriptor_closed), ZT_CASE(other_pid_namespace))
