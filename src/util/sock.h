/*
 * TCP sockets: addresses (IPv4 and IPv6), interface choice, and blocking-with-deadline and
 * non-blocking I/O on non-blocking descriptors.
 *
 * These helpers do not log or record errors: they return 0 or a negative errno, because only
 * the caller knows which peer (rank, host) the socket belongs to and so can write a useful
 * message. Special values: -ETIMEDOUT (deadline passed), -ECANCELED (the abort flag was set),
 * -EPIPE from a receive (the peer closed the connection).
 */
#ifndef ZN_UTIL_SOCK_H
#define ZN_UTIL_SOCK_H

#include <netinet/in.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

union zn_sockaddr {
    struct sockaddr sa;
    struct sockaddr_in in4;
    struct sockaddr_in6 in6;
};

#define ZN_SOCKADDR_STRLEN 64 /* "[v6 address]:port" with room to spare */

socklen_t zn_sockaddr_len(const union zn_sockaddr *a);
void zn_sockaddr_str(const union zn_sockaddr *a, char *buf, size_t len);
int zn_sockaddr_port(const union zn_sockaddr *a);
/* Parse "host:port", "[v6]:port" or "v6addr:port" (last colon separates the port); host names
 * are resolved. Returns 0 or -EINVAL / -ENOENT. */
int zn_sockaddr_parse(const char *hostport, union zn_sockaddr *out);
int zn_sockaddr_is_loopback(const union zn_sockaddr *a);

/* Whether interface ifname passes the ZINC_SOCKET_IFNAME rules: comma-separated prefixes, a
 * leading ^ turns the list into exclusions, a leading = (after any ^) makes matches exact. An
 * empty rule string means "anything but lo and docker*". */
int zn_sock_ifname_allowed(const char *rules, const char *ifname);

/* The interface and address this process uses for zinc's sockets, chosen once from
 * ZINC_SOCKET_IFNAME and ZINC_SOCKET_FAMILY. Loopback is chosen only when nothing else matches
 * or the rules ask for it. Returns 0 or -ENODEV. */
int zn_sock_local_addr(union zn_sockaddr *addr, char *ifname, size_t ifname_len);

/* A listening socket bound to addr (port 0 picks a free one); *bound gets the real address. */
int zn_sock_listen(const union zn_sockaddr *addr, int *fd, union zn_sockaddr *bound);

/* Connect, retrying while the peer is not listening yet, until deadline. */
int zn_sock_connect(const union zn_sockaddr *addr, int64_t deadline, const atomic_int *abort_flag,
                    int *fd);
/* Start a non-blocking connect: 0 with *fd set (completion is reported by zn_sock_connect_done)
 * or a negative errno. */
int zn_sock_connect_start(const union zn_sockaddr *addr, int *fd);
/* 1 if connected, 0 if still in progress, negative errno on failure. */
int zn_sock_connect_done(int fd);

/* Accept one connection, waiting until deadline. */
int zn_sock_accept(int lfd, int64_t deadline, const atomic_int *abort_flag, int *fd);
/* Accept one connection if one is waiting: 0 with *fd set, -EAGAIN if none. */
int zn_sock_try_accept(int lfd, int *fd);
/* For an accepted Unix-domain socket: 1 if the process at the other end runs as this
 * process's effective user (SO_PEERCRED), else 0 (another user, or no credentials). The local
 * services that hand out GPU memory (transport/gpu_peer.c) serve only their own user. */
int zn_sock_peer_is_self_user(int fd);

int zn_sock_send_all(int fd, const void *buf, size_t len, int64_t deadline,
                     const atomic_int *abort_flag);
int zn_sock_recv_all(int fd, void *buf, size_t len, int64_t deadline, const atomic_int *abort_flag);

/* Non-blocking partial I/O: 0 and *done bytes moved (maybe 0), or a negative errno. */
int zn_sock_send_some(int fd, const void *buf, size_t len, size_t *done);
int zn_sock_recv_some(int fd, void *buf, size_t len, size_t *done);
/* zn_sock_send_some of a then b in one call (a header and its payload: one segment less). */
int zn_sock_send2_some(int fd, const void *a, size_t alen, const void *b, size_t blen,
                       size_t *done);

/* TCP_NODELAY, keepalive and (if bufsize > 0) socket buffer sizes for a data socket. */
void zn_sock_tune(int fd, size_t bufsize);

#endif
