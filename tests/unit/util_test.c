/* Unit tests of the util layer: parameters, logging helpers, sockets, shared memory. */
#include "util/clock.h"
#include "util/cuda.h"
#include "util/err.h"
#include "util/hmac.h"
#include "util/log.h"
#include "util/param.h"
#include "util/handle.h"
#include "util/shm.h"
#include "util/size.h"
#include "util/sock.h"
#include "util/thread.h"
#include "zt.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

ZT_TEST(params_parse)
{
    int64_t v;
    ZT_OK(zn_param_parse_size("4M", &v));
    ZT_EQ_INT(v, 4 << 20);
    ZT_OK(zn_param_parse_size("512k", &v));
    ZT_EQ_INT(v, 512 << 10);
    ZT_OK(zn_param_parse_size("2GB", &v));
    ZT_EQ_INT(v, 2ll << 30);
    ZT_OK(zn_param_parse_size("123", &v));
    ZT_EQ_INT(v, 123);
    ZT_ASSERT(zn_param_parse_size("12Q", &v) != 0);
    ZT_ASSERT(zn_param_parse_size("-1", &v) != 0);
    ZT_ASSERT(zn_param_parse_size("", &v) != 0);
    ZT_OK(zn_param_parse_bool("yes", &v));
    ZT_EQ_INT(v, 1);
    ZT_OK(zn_param_parse_bool("0", &v));
    ZT_EQ_INT(v, 0);
    ZT_ASSERT(zn_param_parse_bool("maybe", &v) != 0);
}

/* Environment beats the config file, the NCCL_ name is a fallback, bad values fall back to
 * the default. */
ZT_TEST(params_sources)
{
    char path[] = "/tmp/zinc-conf-XXXXXX";
    int fd = mkstemp(path);
    ZT_ASSERT(fd >= 0);
    const char *conf = "# comment\nZINC_CHUNK_SIZE = 64K\nZINC_SPIN=7 # trailing\n"
                       "NCCL_SOCKET_IFNAME=eth9\nZINC_TIMEOUT=notanumber\n";
    ZT_ASSERT(write(fd, conf, strlen(conf)) == (ssize_t)strlen(conf));
    close(fd);
    setenv("ZINC_CONF_FILE", path, 1);
    setenv("ZINC_SPIN", "11", 1);
    setenv("NCCL_DEBUG_SUBSYS", "INIT", 1);
    unsetenv("ZINC_DEBUG_SUBSYS");
    zn_params_reload();
    const struct zn_params *p = zn_params();
    ZT_EQ_INT(p->chunk_size, 64 << 10);
    ZT_EQ_INT(p->spin, 11);
    ZT_EQ_STR(p->socket_ifname, "eth9");
    ZT_EQ_STR(p->debug_subsys, "INIT");
    ZT_EQ_INT(p->timeout, 600);
    const char *origin;
    ZT_EQ_STR(zn_param_source("ZINC_CHUNK_SIZE", &origin), "64K");
    ZT_EQ_STR(origin, "file");
    ZT_EQ_STR(zn_param_source("ZINC_SPIN", &origin), "11");
    ZT_EQ_STR(origin, "env");
    ZT_EQ_STR(zn_param_source("ZINC_TIMEOUT", &origin), "600");
    ZT_EQ_STR(origin, "default");
    unlink(path);
    unsetenv("ZINC_CONF_FILE");
    unsetenv("ZINC_SPIN");
    unsetenv("NCCL_DEBUG_SUBSYS");
    zn_params_reload();
    ZT_EQ_INT(zn_params()->spin, -1);
    size_t n;
    const struct zn_param_desc *t = zn_param_table(&n);
    ZT_ASSERT(n >= 20);
    for (size_t i = 0; i < n; i++) ZT_ASSERT(t[i].doc && strlen(t[i].doc) > 10);
}

ZT_TEST(log_helpers)
{
    ZT_EQ_INT(zn_log_parse_subsys("INIT"), ZN_INIT);
    ZT_EQ_INT(zn_log_parse_subsys("INIT,NET"), ZN_INIT | ZN_NET);
    ZT_EQ_INT(zn_log_parse_subsys("^SHM"), ~(uint32_t)ZN_SHM);
    ZT_EQ_INT(zn_log_parse_subsys("ALL"), ZN_ALL);
    ZT_EQ_INT(zn_log_parse_subsys("BOOTSTRAP"), ZN_BOOT);
    char out[256], host[128] = "";
    gethostname(host, sizeof(host) - 1);
    zn_log_expand_path("/tmp/z.%h.%p.log", out, sizeof(out));
    char want[256];
    snprintf(want, sizeof(want), "/tmp/z.%s.%d.log", host, (int)getpid());
    ZT_EQ_STR(out, want);
    /* ZINC_DEBUG_FILE receives the log. */
    char path[] = "/tmp/zinc-log-XXXXXX";
    int fd = mkstemp(path);
    ZT_ASSERT(fd >= 0);
    close(fd);
    setenv("ZINC_DEBUG_FILE", path, 1);
    setenv("ZINC_DEBUG", "INFO", 1);
    zn_params_reload();
    zn_info(ZN_INIT, "hello %d", 42);
    zn_error(ncclInvalidArgument, ZN_CALL, "bad thing %s", "x");
    unsetenv("ZINC_DEBUG_FILE");
    unsetenv("ZINC_DEBUG");
    zn_params_reload();
    ZT_EQ_STR(zn_last_error(), "bad thing x");
    char buf[4096] = "";
    fd = open(path, O_RDONLY);
    ssize_t got = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    unlink(path);
    ZT_ASSERT(got > 0);
    ZT_ASSERT(strstr(buf, "zinc INFO INIT hello 42") != NULL);
    ZT_ASSERT(strstr(buf, "zinc WARN CALL bad thing x") != NULL);
}

ZT_TEST(ifname_rules)
{
    ZT_ASSERT(zn_sock_ifname_allowed("", "eth0"));
    ZT_ASSERT(!zn_sock_ifname_allowed("", "lo"));
    ZT_ASSERT(!zn_sock_ifname_allowed("", "docker0"));
    ZT_ASSERT(zn_sock_ifname_allowed("eth", "eth1"));
    ZT_ASSERT(!zn_sock_ifname_allowed("eth", "ib0"));
    ZT_ASSERT(zn_sock_ifname_allowed("ib,eth", "eth1"));
    ZT_ASSERT(!zn_sock_ifname_allowed("^eth", "eth1"));
    ZT_ASSERT(zn_sock_ifname_allowed("^eth", "ib0"));
    ZT_ASSERT(zn_sock_ifname_allowed("=eth0", "eth0"));
    ZT_ASSERT(!zn_sock_ifname_allowed("=eth0", "eth01"));
    ZT_ASSERT(!zn_sock_ifname_allowed("^=eth0", "eth0"));
    ZT_ASSERT(zn_sock_ifname_allowed("^=eth0", "eth01"));
}

ZT_TEST(sockaddr_parse)
{
    union zn_sockaddr a;
    char s[ZN_SOCKADDR_STRLEN];
    ZT_OK(zn_sockaddr_parse("127.0.0.1:1234", &a));
    zn_sockaddr_str(&a, s, sizeof(s));
    ZT_EQ_STR(s, "127.0.0.1:1234");
    ZT_ASSERT(zn_sockaddr_is_loopback(&a));
    ZT_OK(zn_sockaddr_parse("[::1]:80", &a));
    zn_sockaddr_str(&a, s, sizeof(s));
    ZT_EQ_STR(s, "[::1]:80");
    ZT_OK(zn_sockaddr_parse("::1:81", &a));
    ZT_EQ_INT(zn_sockaddr_port(&a), 81);
    ZT_OK(zn_sockaddr_parse("localhost:99", &a));
    ZT_EQ_INT(zn_sockaddr_port(&a), 99);
    ZT_ASSERT(zn_sockaddr_parse("nocolon", &a) != 0);
    ZT_ASSERT(zn_sockaddr_parse("1.2.3.4:99999", &a) != 0);
    ZT_ASSERT(zn_sockaddr_parse("1.2.3.4:", &a) != 0);
}

/* Loopback over IPv4 and IPv6: listen, connect, send and receive with deadlines. */
static int loop_once(const char *where)
{
    union zn_sockaddr a, bound;
    if (zn_sockaddr_parse(where, &a)) return 1;
    int l, c, s;
    if (zn_sock_listen(&a, &l, &bound)) return 2;
    int64_t dl = zn_now_ns() + 5000000000ll;
    if (zn_sock_connect(&bound, dl, NULL, &c)) return 3;
    if (zn_sock_accept(l, dl, NULL, &s)) return 4;
    char msg[100000], got[100000];
    for (size_t i = 0; i < sizeof(msg); i++) msg[i] = (char)(i * 7);
    if (zn_sock_send_all(c, msg, sizeof(msg), dl, NULL)) return 5;
    if (zn_sock_recv_all(s, got, sizeof(got), dl, NULL)) return 6;
    if (memcmp(msg, got, sizeof(msg))) return 7;
    close(c);
    size_t n;
    int rc = zn_sock_recv_some(s, got, 1, &n);
    close(s);
    close(l);
    return rc == -EPIPE ? 0 : 8;
}

ZT_TEST(sock_loopback)
{
    ZT_EQ_INT(loop_once("127.0.0.1:0"), 0);
    if (access("/proc/net/if_inet6", F_OK) == 0) ZT_EQ_INT(loop_once("[::1]:0"), 0);
    /* A deadline with nothing to accept times out; the abort flag cancels. */
    union zn_sockaddr a, b;
    int l, s;
    ZT_OK(zn_sockaddr_parse("127.0.0.1:0", &a));
    ZT_OK(zn_sock_listen(&a, &l, &b));
    ZT_EQ_INT(zn_sock_accept(l, zn_now_ns() + 100000000ll, NULL, &s), -ETIMEDOUT);
    atomic_int flag = 1;
    ZT_EQ_INT(zn_sock_accept(l, zn_now_ns() + 5000000000ll, &flag, &s), -ECANCELED);
    close(l);
}

/* Peer credentials on a Unix socket: a connection from this user passes; as root, one from a
 * child that dropped to another user (nobody) is refused. */
static int unix_pair(int *l, int *c, struct sockaddr_un *a, socklen_t *len)
{
    memset(a, 0, sizeof(*a));
    a->sun_family = AF_UNIX;
    int n = snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1, "zinc-test-cred-%d", (int)getpid());
    *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
    *l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    *c = -1;
    return *l >= 0 && bind(*l, (struct sockaddr *)a, *len) == 0 && listen(*l, 4) == 0 ? 0 : -1;
}

ZT_TEST(sock_peer_user)
{
    struct sockaddr_un a;
    socklen_t len;
    int l, c, s;
    ZT_EQ_INT(unix_pair(&l, &c, &a, &len), 0);
    c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ZT_EQ_INT(connect(c, (struct sockaddr *)&a, len), 0);
    s = accept4(l, NULL, NULL, SOCK_CLOEXEC);
    ZT_ASSERT(s >= 0);
    ZT_EQ_INT(zn_sock_peer_is_self_user(s), 1);
    close(s);
    close(c);
    if (geteuid() == 0) {
        pid_t pid = fork();
        if (pid == 0) {
            if (setgid(65534) != 0 || setuid(65534) != 0) _exit(3);
            int k = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
            if (k < 0 || connect(k, (struct sockaddr *)&a, len) != 0) _exit(4);
            char b;
            _exit(read(k, &b, 1) == 0 ? 0 : 5); /* wait until the parent closes */
        }
        s = accept4(l, NULL, NULL, SOCK_CLOEXEC);
        ZT_ASSERT(s >= 0);
        ZT_EQ_INT(zn_sock_peer_is_self_user(s), 0);
        close(s);
        int st = 0;
        ZT_EQ_INT(waitpid(pid, &st, 0), pid);
        ZT_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    close(l);
}

ZT_TEST(shm_segments)
{
    char name[64];
    snprintf(name, sizeof(name), "/zn-test-%d", (int)getpid());
    struct zn_shm_seg a, b, c;
    ZT_EQ_INT(zn_shm_create(name, 10000, 3, &a), ncclSuccess);
    struct stat st;
    char path[128];
    snprintf(path, sizeof(path), "/dev/shm%s", name);
    ZT_EQ_INT(stat(path, &st), 0);
    ZT_EQ_INT(st.st_mode & 0777, 0600);
    memset(a.base, 0xab, 10000);
    ZT_EQ_INT(zn_shm_attach(name, 10000, zn_now_ns() + 1000000000ll, NULL, &b), 0);
    ZT_EQ_INT(((unsigned char *)b.base)[9999], 0xab);
    ZT_EQ_INT(stat(path, &st), 0); /* 2 of 3 mapped: still there */
    /* A wrong size is refused. */
    ZT_EQ_INT(zn_shm_attach(name, 20000, zn_now_ns() + 100000000ll, NULL, &c), -ETIMEDOUT);
    ZT_EQ_INT(zn_shm_attach(name, 10000, zn_now_ns() + 1000000000ll, NULL, &c), 0);
    ZT_ASSERT(stat(path, &st) != 0 && errno == ENOENT); /* last mapper unlinked it */
    ZT_EQ_INT(((unsigned char *)c.base)[0], 0xab);
    zn_shm_detach(&a);
    zn_shm_detach(&b);
    zn_shm_detach(&c);
    /* Waiting for a segment nobody creates times out. */
    ZT_EQ_INT(zn_shm_attach("/zn-test-never", 100, zn_now_ns() + 50000000ll, NULL, &c), -ETIMEDOUT);
}

/* Round-ups and sums near SIZE_MAX report overflow instead of wrapping; segments whose size
 * cannot be mapped are refused before anything is created; mapped ranges are told apart. */
ZT_TEST(size_overflow)
{
    size_t out = 7;
    ZT_EQ_INT(zn_round_up(0, 4096, &out), 0);
    ZT_EQ_INT((long long)out, 0);
    ZT_EQ_INT(zn_round_up(4097, 4096, &out), 0);
    ZT_EQ_INT((long long)out, 8192);
    ZT_EQ_INT(zn_round_up(100, 3000000, &out), 0); /* any alignment, not only powers of two */
    ZT_EQ_INT((long long)out, 3000000);
    ZT_EQ_INT(zn_round_up(SIZE_MAX - 4094, 4096, &out), -1);
    ZT_EQ_INT(zn_round_up(SIZE_MAX, 2, &out), -1);
    ZT_EQ_INT((long long)out, 3000000); /* left alone on overflow */
    ZT_EQ_INT(zn_add_size(SIZE_MAX, 1, &out), -1);
    ZT_EQ_INT(zn_add_size(SIZE_MAX - 1, 1, &out), 0);
    ZT_ASSERT(out == SIZE_MAX);

    char name[64];
    snprintf(name, sizeof(name), "/zn-test-big-%d", (int)getpid());
    const size_t huge[] = { SIZE_MAX, SIZE_MAX - 4096, SIZE_MAX - 8191, (size_t)INT64_MAX };
    struct zn_shm_seg seg;
    char path[128];
    snprintf(path, sizeof(path), "/dev/shm%s", name);
    for (int i = 0; i < 4; i++) {
        ZT_EQ_INT(zn_shm_create(name, huge[i], 1, &seg), ncclInvalidArgument);
        ZT_ASSERT(strstr(zn_last_error(), "too large"));
        struct stat st;
        ZT_ASSERT(stat(path, &st) != 0 && errno == ENOENT); /* nothing left behind */
        ZT_EQ_INT(zn_shm_attach(name, huge[i], zn_now_ns(), NULL, &seg), -EPROTO);
    }

    long page = sysconf(_SC_PAGESIZE);
    char *m =
        mmap(NULL, (size_t)page * 3, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ZT_ASSERT(m != MAP_FAILED);
    ZT_EQ_INT(munmap(m + page, (size_t)page), 0); /* a hole in the middle */
    ZT_EQ_INT(zn_host_range_mapped(m, (size_t)page), 1);
    ZT_EQ_INT(zn_host_range_mapped(m + 10, (size_t)page - 10), 1);
    ZT_EQ_INT(zn_host_range_mapped(m + 10, (size_t)page), 0);
    ZT_EQ_INT(zn_host_range_mapped(m, (size_t)page * 3), 0);
    ZT_EQ_INT(zn_host_range_mapped(m + 2 * page, (size_t)page), 1);
    ZT_EQ_INT(zn_host_range_mapped(m, SIZE_MAX), 0); /* wraps */
    ZT_EQ_INT(zn_host_range_mapped(m, 0), 1);
    munmap(m, (size_t)page);
    munmap(m + 2 * page, (size_t)page);
}

/* A freed handle reads as zeroes (the check's magic with it) and its memory is not reused
 * until ZN_HANDLE_KEEP others wait; the live list is what each() walks. */
static void count_live(void *obj, void *arg)
{
    (void)obj;
    (*(int *)arg)++;
}

ZT_TEST(handle_pool)
{
    static struct zn_handle_pool pool = ZN_HANDLE_POOL_INIT("test object");
    uint64_t *a, *b;
    ZT_OK(zn_handle_alloc(&pool, 64, (void **)&a));
    ZT_OK(zn_handle_alloc(&pool, 64, (void **)&b));
    ZT_EQ_INT(zn_handle_alloc(&pool, 32, (void **)&b), ncclInternalError); /* one size a pool */
    a[0] = b[0] = 0x1234;
    int n = 0;
    zn_handle_each(&pool, count_live, &n);
    ZT_EQ_INT(n, 2);
    zn_handle_free(&pool, a);
    ZT_ASSERT(a[0] == 0 && a[7] == 0); /* still readable, zeroed */
    n = 0;
    zn_handle_each(&pool, count_live, &n);
    ZT_EQ_INT(n, 1);
    zn_handle_unlist(&pool, b); /* unlisted, then freed: once only */
    zn_handle_free(&pool, b);
    /* The next ZN_HANDLE_KEEP allocations do not get a or b back. */
    uint64_t *more[ZN_HANDLE_KEEP + 2];
    for (int i = 0; i < ZN_HANDLE_KEEP; i++) {
        ZT_OK(zn_handle_alloc(&pool, 64, (void **)&more[i]));
        ZT_ASSERT(more[i] != a && more[i] != b && more[i][0] == 0);
    }
    for (int i = 0; i < ZN_HANDLE_KEEP; i++) zn_handle_free(&pool, more[i]);
    n = 0;
    zn_handle_each(&pool, count_live, &n);
    ZT_EQ_INT(n, 0);
    /* With more shells waiting than kept, the oldest (a) is reused, zeroed. */
    ZT_OK(zn_handle_alloc(&pool, 64, (void **)&more[0]));
    ZT_ASSERT(more[0] == a && a[0] == 0);
    zn_handle_free(&pool, more[0]);
}

/* The CUDA wrappers where there is no GPU to use. A build without CUDA answers what each entry
 * of util/cuda_api.h says (the stubs util/cuda_none.c makes from the list); any build, GPU or
 * not, finds that host memory is no device memory. */
ZT_TEST(cuda_without_gpu)
{
    int local = 0;
    struct zn_cumem m;
    ZT_EQ_INT(zn_cuda_pointer_device(&local), -1);
    ZT_ASSERT(zn_cuda_alloc_bytes(&local) == 0);
    ZT_ASSERT(zn_cuda_alloc_bytes(NULL) == 0);
    ZT_EQ_INT(zn_cumem_find(&local, &m), -1);
    ZT_EQ_INT(zn_cumem_lookup(&local, &m), -1);
#ifdef ZINC_NO_CUDA_HEADERS
    ZT_EQ_INT(zn_cuda_available(), 0);
    ZT_EQ_INT(zn_cuda_current_device(), -1);
    ZT_EQ_INT(zn_cuda_enter(0), -1);
    ZT_EQ_INT(zn_cuda_device_by_bus_id("0000:1b:00.0"), -1);
    ZT_EQ_INT(zn_cuda_can_access_peer(0, 0), 0);
    ZT_EQ_INT(zn_cuda_stream_capturing(NULL), 0);
    ZT_EQ_INT(zn_cuda_write_value64(NULL, &local, 1), -1);
    ZT_EQ_INT(zn_cuda_set_device(0), ncclInvalidUsage);
    ZT_EQ_STR(zn_last_error(), "cudaSetDevice: this zinc build has no CUDA support");
    void *p = &local;
    ZT_EQ_INT(zn_cuda_malloc(&p, 64, "a test buffer"), ncclInvalidUsage);
    ZT_EQ_STR(zn_last_error(), "a test buffer: this zinc build has no CUDA support");
    ZT_ASSERT(p == &local); /* output untouched */
    ZT_EQ_INT(zn_cumem_alloc(0, 64, &m), ncclInvalidUsage);
    zn_cuda_free(&local); /* nothing to free: no effect */
    zn_cuda_leave(0, 1);
    struct zn_cuda_system sys;
    memset(&sys, 0x5a, sizeof(sys));
    zn_cuda_query_system(&sys);
    ZT_EQ_INT(sys.state, ZN_CUDA_NOT_BUILT);
    ZT_EQ_INT(sys.ndev, 0);
    ZT_EQ_INT(sys.driver_version, 0);
    struct zn_cuda_gpu g;
    memset(&g, 0x5a, sizeof(g));
    ZT_EQ_INT(zn_cuda_query_gpu(0, &g), ncclInvalidUsage);
    ZT_EQ_STR(zn_last_error(), "device query: this zinc build has no CUDA support");
    ZT_EQ_STR(g.name, "");
    ZT_EQ_INT(g.sm_count, 0);
    struct zn_cuda_link l;
    memset(&l, 0x5a, sizeof(l));
    zn_cuda_query_link(0, 1, &l);
    ZT_EQ_INT(l.access, 0);
    ZT_EQ_INT(l.atomics, 0);
    ZT_EQ_INT(l.perf_rank, -1);
    ZT_EQ_STR(zn_cuda_last_error_string(), "no CUDA in this build");
#endif
}

static void hex(const uint8_t *b, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++) snprintf(out + 2 * i, 3, "%02x", b[i]);
}

static void hmac1(const void *key, size_t klen, const char *msg, char out[65])
{
    const void *part[2] = { msg, msg + 3 };
    size_t len[2] = { 3, strlen(msg) - 3 }; /* in two parts: the parts are concatenated */
    uint8_t mac[ZN_SHA256_BYTES];
    zn_hmac_sha256(key, klen, part, len, 2, mac);
    hex(mac, sizeof(mac), out);
}

/* FIPS 180-2 appendix B examples and RFC 4231 test cases 1, 2, 6 and 7. */
ZT_TEST(sha256_hmac_vectors)
{
    uint8_t d[ZN_SHA256_BYTES];
    char h[65];
    zn_sha256("abc", 3, d);
    hex(d, sizeof(d), h);
    ZT_EQ_STR(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    zn_sha256(two, strlen(two), d);
    hex(d, sizeof(d), h);
    ZT_EQ_STR(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    zn_sha256("", 0, d);
    hex(d, sizeof(d), h);
    ZT_EQ_STR(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    /* A million 'a' fed in uneven pieces (B.3). */
    static char a[1001];
    memset(a, 'a', sizeof(a));
    struct zn_sha256 s;
    zn_sha256_init(&s);
    for (int i = 0; i < 1000; i++) zn_sha256_update(&s, a, i % 2 ? 999 : 1001);
    zn_sha256_final(&s, d);
    hex(d, sizeof(d), h);
    ZT_EQ_STR(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");

    uint8_t key[131];
    memset(key, 0x0b, 20);
    hmac1(key, 20, "Hi There", h);
    ZT_EQ_STR(h, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
    hmac1("Jefe", 4, "what do ya want for nothing?", h);
    ZT_EQ_STR(h, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    memset(key, 0xaa, sizeof(key));
    hmac1(key, 131, "Test Using Larger Than Block-Size Key - Hash Key First", h);
    ZT_EQ_STR(h, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
    hmac1(key, 131,
          "This is a test using a larger than block-size key and a larger than block-size data. "
          "The key needs to be hashed before being used by the HMAC algorithm.",
          h);
    ZT_EQ_STR(h, "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
    ZT_ASSERT(zn_ct_equal("abcd", "abcd", 4));
    ZT_ASSERT(!zn_ct_equal("abcd", "abce", 4));
}

/* A listener takes each handshake nonce once (a replayed message is refused). */
ZT_TEST(nonce_set)
{
    struct zn_nonce_set set = { 0 };
    uint8_t nonce[32] = { 0 };
    for (int i = 0; i < 100; i++) {
        nonce[i % 32] ^= (uint8_t)(i + 1);
        ZT_EQ_INT(zn_nonce_seen(&set, nonce), 0);
        ZT_EQ_INT(zn_nonce_seen(&set, nonce), 1);
    }
    ZT_EQ_INT(set.n, 100);
    zn_nonce_set_free(&set);
    ZT_ASSERT(set.seen == NULL && set.n == 0);
}

/* zn_thread_spread on a thread of its own (affinity is per thread): what a thread pinned to
 * one CPU gets, an explicit list, lists that must be refused. Returns what failed, or NULL. */
static void *spread_cases(void *arg)
{
    const cpu_set_t *all = arg;
    int first = 0;
    while (!CPU_ISSET(first, all)) first++;
    cpu_set_t one, got;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    char desc[256], want[16];
    snprintf(want, sizeof(want), "%d", first);
    if (sched_setaffinity(0, sizeof(one), &one) != 0) return "pin to one CPU";
    if (zn_thread_spread("", desc, sizeof(desc)) != 0) return "spread from one CPU";
    if (sched_getaffinity(0, sizeof(got), &got) != 0) return "getaffinity";
    /* At least every CPU the process had (the cpuset may allow more than a taskset did). */
    CPU_AND(&one, &got, all);
    if (!CPU_EQUAL(&one, all)) return "a pinned thread spreads to every allowed CPU";
    if (CPU_COUNT(all) > 1 && !strchr(desc, ',') && !strchr(desc, '-'))
        return "the description lists several CPUs";
    /* Not pinned: left alone. */
    if (zn_thread_spread(NULL, desc, sizeof(desc)) != 0) return "spread, not pinned";
    cpu_set_t again;
    if (sched_getaffinity(0, sizeof(again), &again) != 0 || !CPU_EQUAL(&again, &got))
        return "a thread on several CPUs is left alone";
    if (zn_thread_spread(want, desc, sizeof(desc)) != 0 || strcmp(desc, want) != 0)
        return "an explicit list";
    const char *bad[] = { "x", "3-1", "1,", "-2", "0-99999", "1;2" };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (zn_thread_spread(bad[i], desc, sizeof(desc)) != EINVAL) return "a malformed list";
    if (sched_getaffinity(0, sizeof(again), &again) != 0 || CPU_COUNT(&again) != 1)
        return "a refused list leaves the affinity as it was";
    return NULL;
}

ZT_TEST(thread_spread)
{
    cpu_set_t all;
    ZT_ASSERT(sched_getaffinity(0, sizeof(all), &all) == 0);
    pthread_t t;
    ZT_ASSERT(pthread_create(&t, NULL, spread_cases, &all) == 0);
    void *failed = NULL;
    ZT_ASSERT(pthread_join(t, &failed) == 0);
    if (failed) ZT_FAIL("zn_thread_spread: %s", (const char *)failed);
}

ZT_MAIN(ZT_CASE(params_parse), ZT_CASE(params_sources), ZT_CASE(log_helpers), ZT_CASE(ifname_rules),
        ZT_CASE(sockaddr_parse), ZT_CASE(sock_loopback), ZT_CASE(sock_peer_user),
        ZT_CASE(shm_segments), ZT_CASE(cuda_without_gpu), ZT_CASE(size_overflow),
        ZT_CASE(handle_pool), ZT_CASE(sha256_hmac_vectors), ZT_CASE(nonce_set),
        ZT_CASE(thread_spread))
