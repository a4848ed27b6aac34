/*
 * Socket helpers. Every descriptor is non-blocking and close-on-exec; "blocking" calls are
 * poll() loops in slices of at most 50 ms so that the abort flag and the deadline are seen
 * promptly.
 */
#include "sock.h"
#include "clock.h"
#include "param.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#define POLL_SLICE_MS 50

socklen_t zn_sockaddr_len(const union zn_sockaddr *a)
{
    return a->sa.sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

int zn_sockaddr_port(const union zn_sockaddr *a)
{
    return ntohs(a->sa.sa_family == AF_INET6 ? a->in6.sin6_port : a->in4.sin_port);
}

void zn_sockaddr_str(const union zn_sockaddr *a, char *buf, size_t len)
{
    char host[INET6_ADDRSTRLEN] = "?";
    if (a->sa.sa_family == AF_INET6) {
        inet_ntop(AF_INET6, &a->in6.sin6_addr, host, sizeof(host));
        snprintf(buf, len, "[%s]:%d", host, zn_sockaddr_port(a));
    } else if (a->sa.sa_family == AF_INET) {
        inet_ntop(AF_INET, &a->in4.sin_addr, host, sizeof(host));
        snprintf(buf, len, "%s:%d", host, zn_sockaddr_port(a));
    } else {
        snprintf(buf, len, "<no address>");
    }
}

int zn_sockaddr_is_loopback(const union zn_sockaddr *a)
{
    if (a->sa.sa_family == AF_INET) return (ntohl(a->in4.sin_addr.s_addr) >> 24) == 127;
    if (a->sa.sa_family == AF_INET6) return IN6_IS_ADDR_LOOPBACK(&a->in6.sin6_addr);
    return 0;
}

int zn_sockaddr_parse(const char *hostport, union zn_sockaddr *out)
{
    char host[256];
    const char *colon = strrchr(hostport, ':');
    if (!colon || colon == hostport || !colon[1]) return -EINVAL;
    size_t hlen = (size_t)(colon - hostport);
    const char *h = hostport;
    if (h[0] == '[' && hlen >= 2 && h[hlen - 1] == ']') {
        h++;
        hlen -= 2;
    }
    if (hlen >= sizeof(host)) return -EINVAL;
    memcpy(host, h, hlen);
    host[hlen] = 0;
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end || port < 0 || port > 65535) return -EINVAL;

    struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res = NULL;
    if (getaddrinfo(host, NULL, &hints, &res) != 0 || !res) return -ENOENT;
    memset(out, 0, sizeof(*out));
    memcpy(out, res->ai_addr, res->ai_addrlen < sizeof(*out) ? res->ai_addrlen : sizeof(*out));
    freeaddrinfo(res);
    if (out->sa.sa_family == AF_INET6)
        out->in6.sin6_port = htons((uint16_t)port);
    else
        out->in4.sin_port = htons((uint16_t)port);
    return 0;
}

int zn_sock_ifname_allowed(const char *rules, const char *ifname)
{
    if (!rules || !*rules) return strcmp(ifname, "lo") != 0 && strncmp(ifname, "docker", 6) != 0;
    int exclude = 0, exact = 0;
    if (*rules == '^') {
        exclude = 1;
        rules++;
    }
    if (*rules == '=') {
        exact = 1;
        rules++;
    }
    int matched = 0;
    const char *p = rules;
    while (*p && !matched) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        if (n > 0) {
            if (exact)
                matched = strlen(ifname) == n && !strncmp(ifname, p, n);
            else
                matched = !strncmp(ifname, p, n);
        }
        p += n + (comma ? 1 : 0);
    }
    return exclude ? !matched : matched;
}

static union zn_sockaddr local_addr;
static char local_ifname[IF_NAMESIZE + 1];
static int local_rc = -ENODEV;
static pthread_once_t local_once = PTHREAD_ONCE_INIT;

static int family_wanted(int fam)
{
    const char *f = zn_params()->socket_family;
    if (!strcmp(f, "AF_INET") || !strcmp(f, "4") || !strcasecmp(f, "ipv4")) return fam == AF_INET;
    if (!strcmp(f, "AF_INET6") || !strcmp(f, "6") || !strcasecmp(f, "ipv6")) return fam == AF_INET6;
    return fam == AF_INET || fam == AF_INET6;
}

/* Pick the first address that passes the rules; IPv4 before IPv6, and loopback only if it is
 * the only choice left (or the rules name it). IPv6 link-local addresses are skipped: they
 * need a scope id that a peer on another host cannot use. */
static void pick_local(void)
{
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) != 0) {
        local_rc = -errno;
        return;
    }
    const char *rules = zn_params()->socket_ifname;
    for (int pass = 0; pass < 4 && local_rc != 0; pass++) {
        int fam = pass % 2 == 0 ? AF_INET : AF_INET6;
        int want_loop = pass >= 2;
        for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
            if (!i->ifa_addr || i->ifa_addr->sa_family != fam || !family_wanted(fam)) continue;
            if (!(i->ifa_flags & IFF_UP)) continue;
            int loop = (i->ifa_flags & IFF_LOOPBACK) != 0;
            if (loop != want_loop) continue;
            if (fam == AF_INET6 &&
                IN6_IS_ADDR_LINKLOCAL(&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr))
                continue;
            /* With no rules, loopback is allowed in the last passes (nothing else matched). */
            if (*rules ? !zn_sock_ifname_allowed(rules, i->ifa_name)
                       : (!loop && !zn_sock_ifname_allowed(rules, i->ifa_name)))
                continue;
            memset(&local_addr, 0, sizeof(local_addr));
            memcpy(&local_addr, i->ifa_addr,
                   fam == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6));
            snprintf(local_ifname, sizeof(local_ifname), "%s", i->ifa_name);
            local_rc = 0;
            break;
        }
    }
    freeifaddrs(ifs);
}

int zn_sock_local_addr(union zn_sockaddr *addr, char *ifname, size_t ifname_len)
{
    pthread_once(&local_once, pick_local);
    if (local_rc != 0) return local_rc;
    *addr = local_addr;
    if (ifname) snprintf(ifname, ifname_len, "%s", local_ifname);
    return 0;
}

static int new_socket(int family, int *fd)
{
    int s = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s < 0) return -errno;
    *fd = s;
    return 0;
}

int zn_sock_listen(const union zn_sockaddr *addr, int *fd, union zn_sockaddr *bound)
{
    int s = -1, rc = new_socket(addr->sa.sa_family, &s);
    if (rc) return rc;
    int one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(s, &addr->sa, zn_sockaddr_len(addr)) != 0 || listen(s, 16384) != 0) {
        rc = -errno;
        close(s);
        return rc;
    }
    union zn_sockaddr b;
    memset(&b, 0, sizeof(b)); /* an IPv4 name leaves the rest of the union unwritten */
    socklen_t blen = sizeof(b);
    if (getsockname(s, &b.sa, &blen) != 0) {
        rc = -errno;
        close(s);
        return rc;
    }
    *bound = b;
    *fd = s;
    return 0;
}

static int wait_fd(int fd, short events, int64_t deadline, const atomic_int *abort_flag)
{
    for (;;) {
        if (abort_flag && atomic_load_explicit(abort_flag, memory_order_relaxed)) return -ECANCELED;
        int64_t now = zn_now_ns();
        if (now >= deadline) return -ETIMEDOUT;
        struct pollfd p = { .fd = fd, .events = events };
        int n = poll(&p, 1, zn_ms_left(deadline, POLL_SLICE_MS));
        if (n < 0 && errno != EINTR) return -errno;
        if (n > 0) return 0;
    }
}

int zn_sock_connect_start(const union zn_sockaddr *addr, int *fd)
{
    int s = -1, rc = new_socket(addr->sa.sa_family, &s);
    if (rc) return rc;
    if (connect(s, &addr->sa, zn_sockaddr_len(addr)) != 0 && errno != EINPROGRESS) {
        rc = -errno;
        close(s);
        return rc;
    }
    *fd = s;
    return 0;
}

int zn_sock_connect_done(int fd)
{
    struct pollfd p = { .fd = fd, .events = POLLOUT };
    int n = poll(&p, 1, 0);
    if (n < 0) return errno == EINTR ? 0 : -errno;
    if (n == 0) return 0;
    int err = 0;
    socklen_t len = sizeof(err);
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) return -errno;
    return err ? -err : 1;
}

int zn_sock_connect(const union zn_sockaddr *addr, int64_t deadline, const atomic_int *abort_flag,
                    int *fd)
{
    int delay_ms = 1;
    for (;;) {
        int s = -1, rc = zn_sock_connect_start(addr, &s);
        if (rc == 0) {
            rc = wait_fd(s, POLLOUT, deadline, abort_flag);
            if (rc == 0) rc = zn_sock_connect_done(s);
            if (rc == 1) {
                *fd = s;
                return 0;
            }
            close(s);
        }
        /* The peer may not be listening yet: retry refused / unreachable with backoff. */
        if (rc != -ECONNREFUSED && rc != -ECONNRESET && rc != -EHOSTUNREACH && rc != -ENETUNREACH &&
            rc != -EAGAIN && rc != 0)
            return rc;
        if (abort_flag && atomic_load(abort_flag)) return -ECANCELED;
        if (zn_now_ns() + (int64_t)delay_ms * 1000000 >= deadline) return -ETIMEDOUT;
        struct timespec ts = { .tv_sec = 0, .tv_nsec = (long)delay_ms * 1000000 };
        nanosleep(&ts, NULL);
        if (delay_ms < 100) delay_ms *= 2;
    }
}

int zn_sock_try_accept(int lfd, int *fd)
{
    int s = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (s < 0) return errno == EWOULDBLOCK ? -EAGAIN : -errno;
    *fd = s;
    return 0;
}

int zn_sock_peer_is_self_user(int fd)
{
    struct ucred cr;
    socklen_t len = sizeof(cr);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0 || len != sizeof(cr)) return 0;
    return cr.uid == geteuid();
}

int zn_sock_accept(int lfd, int64_t deadline, const atomic_int *abort_flag, int *fd)
{
    for (;;) {
        int rc = zn_sock_try_accept(lfd, fd);
        if (rc != -EAGAIN && rc != -EINTR && rc != -ECONNABORTED) return rc;
        rc = wait_fd(lfd, POLLIN, deadline, abort_flag);
        if (rc) return rc;
    }
}

int zn_sock_send_some(int fd, const void *buf, size_t len, size_t *done)
{
    *done = 0;
    if (len == 0) return 0;
    ssize_t n = send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) return (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) ? 0 : -errno;
    *done = (size_t)n;
    return 0;
}

int zn_sock_send2_some(int fd, const void *a, size_t alen, const void *b, size_t blen, size_t *done)
{
    *done = 0;
    if (alen + blen == 0) return 0;
    struct iovec iov[2] = { { (void *)a, alen }, { (void *)b, blen } };
    struct msghdr m = { .msg_iov = iov, .msg_iovlen = blen ? 2 : 1 };
    ssize_t n = sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) return (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) ? 0 : -errno;
    *done = (size_t)n;
    return 0;
}

int zn_sock_recv_some(int fd, void *buf, size_t len, size_t *done)
{
    *done = 0;
    if (len == 0) return 0;
    ssize_t n = recv(fd, buf, len, MSG_DONTWAIT);
    if (n == 0) return -EPIPE;
    if (n < 0) return (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) ? 0 : -errno;
    *done = (size_t)n;
    return 0;
}

int zn_sock_send_all(int fd, const void *buf, size_t len, int64_t deadline,
                     const atomic_int *abort_flag)
{
    const char *p = buf;
    while (len > 0) {
        size_t n;
        int rc = zn_sock_send_some(fd, p, len, &n);
        if (rc) return rc;
        p += n;
        len -= n;
        if (len && n == 0 && (rc = wait_fd(fd, POLLOUT, deadline, abort_flag))) return rc;
    }
    return 0;
}

int zn_sock_recv_all(int fd, void *buf, size_t len, int64_t deadline, const atomic_int *abort_flag)
{
    char *p = buf;
    while (len > 0) {
        size_t n;
        int rc = zn_sock_recv_some(fd, p, len, &n);
        if (rc) return rc;
        p += n;
        len -= n;
        if (len && n == 0 && (rc = wait_fd(fd, POLLIN, deadline, abort_flag))) return rc;
    }
    return 0;
}

void zn_sock_tune(int fd, size_t bufsize)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
    if (bufsize > 0) {
        int sz = bufsize > (1u << 30) ? (1 << 30) : (int)bufsize;
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
    }
}
