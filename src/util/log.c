/*
 * Logging back end: one formatted line per call, written with a single write() so lines from
 * threads and processes sharing a file do not interleave.
 */
#include "log.h"
#include "zinc.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int zn_log_level_cur = ZN_LOG_WARN;
uint32_t zn_log_subsys_cur = ZN_ALL;
_Thread_local int zn_log_rank = -1;

static FILE *log_file;
static char log_host[64];
static pthread_once_t host_once = PTHREAD_ONCE_INIT;

/* The host name of the prefix, up to its first dot. Filled on first use as well as at
 * configuration: a message may come before the parameters are read (an error in the process's
 * first call, e.g. ncclGroupEnd without ncclGroupStart). */
static void fill_host(void)
{
    if (gethostname(log_host, sizeof(log_host)) != 0) snprintf(log_host, sizeof(log_host), "?");
    log_host[sizeof(log_host) - 1] = 0;
    char *dot = strchr(log_host, '.');
    if (dot) *dot = 0;
}
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static int banner_done;
/* Where lines go instead of the log file, if set (libmscclpp's mscclppSetLogHandler). */
static void (*_Atomic log_sink)(const char *line);

void zn_log_set_sink(void (*sink)(const char *line))
{
    atomic_store_explicit(&log_sink, sink, memory_order_release);
}

static const char *level_names[] = { "NONE", "VERSION", "WARN", "INFO", "TRACE" };

static const struct {
    const char *name;
    uint32_t bit;
} subsys_names[] = {
#define ZN_X(name, bit) { #name, 1u << (bit) },
    ZN_LOG_SUBSYS(ZN_X)
#undef ZN_X
};

static const char *subsys_name(uint32_t bits)
{
    for (size_t i = 0; i < sizeof(subsys_names) / sizeof(subsys_names[0]); i++)
        if (bits & subsys_names[i].bit) return subsys_names[i].name;
    return "ALL";
}

uint32_t zn_log_parse_subsys(const char *list)
{
    int invert = 0;
    if (*list == '^') {
        invert = 1;
        list++;
    }
    uint32_t bits = 0;
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", list);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (!strcasecmp(tok, "ALL")) {
            bits = ZN_ALL;
            continue;
        }
        /* NCCL's long names map onto ours so existing NCCL_DEBUG_SUBSYS values keep working. */
        if (!strcasecmp(tok, "BOOTSTRAP")) tok = "BOOT";
        for (size_t i = 0; i < sizeof(subsys_names) / sizeof(subsys_names[0]); i++)
            if (!strcasecmp(tok, subsys_names[i].name)) bits |= subsys_names[i].bit;
    }
    return invert ? ~bits : bits;
}

void zn_log_expand_path(const char *pattern, char *out, size_t outlen)
{
    size_t o = 0;
    char host[64];
    if (gethostname(host, sizeof(host)) != 0) snprintf(host, sizeof(host), "unknown");
    host[sizeof(host) - 1] = 0;
    for (const char *p = pattern; *p && o + 1 < outlen; p++) {
        if (p[0] == '%' && (p[1] == 'h' || p[1] == 'p')) {
            int n = p[1] == 'h' ? snprintf(out + o, outlen - o, "%s", host)
                                : snprintf(out + o, outlen - o, "%d", (int)getpid());
            if (n > 0) o += (size_t)n;
            if (o >= outlen) o = outlen - 1;
            p++;
        } else {
            out[o++] = *p;
        }
    }
    out[o] = 0;
}

static void configure(const char *debug, const char *subsys, const char *file)
{
    int level = ZN_LOG_WARN;
    for (int i = 0; i < 5; i++)
        if (!strcasecmp(debug, level_names[i])) level = i;
    if (!strcasecmp(debug, "ABORT")) level = ZN_LOG_WARN;
    zn_log_subsys_cur = zn_log_parse_subsys(subsys);
    pthread_once(&host_once, fill_host);
    if (log_file && log_file != stderr) fclose(log_file);
    log_file = stderr;
    if (*file) {
        char path[4096];
        zn_log_expand_path(file, path, sizeof(path));
        FILE *f = fopen(path, "a");
        if (f) {
            setvbuf(f, NULL, _IONBF, 0);
            log_file = f;
        } else {
            fprintf(stderr, "zinc WARN: cannot open ZINC_DEBUG_FILE %s; logging to stderr\n", path);
        }
    }
    zn_log_level_cur = level;
}

void zn_log_configure(const char *debug, const char *subsys, const char *file)
{
    pthread_mutex_lock(&log_lock);
    configure(debug, subsys, file);
    int banner = !banner_done;
    banner_done = 1;
    pthread_mutex_unlock(&log_lock);
    /* The banner shows at VERSION and at INFO or more, not at the default WARN. */
    if (banner && (zn_log_level_cur == ZN_LOG_VERSION || zn_log_level_cur >= ZN_LOG_INFO))
        zn_log(zn_log_level_cur >= ZN_LOG_INFO ? ZN_LOG_INFO : ZN_LOG_VERSION, ZN_INIT,
               "zinc %s (NCCL API %d.%d.%d)", ZINC_VERSION_STRING, NCCL_MAJOR, NCCL_MINOR,
               NCCL_PATCH);
}

void zn_log_emit(int level, uint32_t subsys, const char *file, int line, const char *fmt, ...)
{
    char buf[2048];
    int n;
    pthread_once(&host_once, fill_host);
    if (zn_log_rank >= 0)
        n = snprintf(buf, sizeof(buf), "%s:%d:%d [%d] zinc %s %s ", log_host, (int)getpid(),
                     (int)syscall(SYS_gettid), zn_log_rank, level_names[level],
                     subsys_name(subsys));
    else
        n = snprintf(buf, sizeof(buf), "%s:%d:%d zinc %s %s ", log_host, (int)getpid(),
                     (int)syscall(SYS_gettid), level_names[level], subsys_name(subsys));
    if (n < 0) return;
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(buf + n, sizeof(buf) - (size_t)n, fmt, ap);
    va_end(ap);
    if (m < 0) return;
    size_t len = (size_t)n + (size_t)m;
    if (len > sizeof(buf) - 2) len = sizeof(buf) - 2;
    if (level >= ZN_LOG_TRACE) {
        int k = snprintf(buf + len, sizeof(buf) - len, " (%s:%d)", file, line);
        if (k > 0) len += (size_t)k;
        if (len > sizeof(buf) - 2) len = sizeof(buf) - 2;
    }
    buf[len++] = '\n';
    void (*sink)(const char *) = atomic_load_explicit(&log_sink, memory_order_acquire);
    if (sink) {
        buf[len] = 0;
        sink(buf);
        return;
    }
    FILE *f = log_file ? log_file : stderr;
    ssize_t w = write(fileno(f), buf, len);
    (void)w;
}
