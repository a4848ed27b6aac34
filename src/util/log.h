/*
 * Logging. zn_log() checks the level and subsystem before it formats anything, so a
 * disabled message costs one load and a branch.
 *
 * Lines look like   host:pid:tid [rank] zinc LEVEL SUBSYS message
 * and go to stderr or to ZINC_DEBUG_FILE (%h = host name, %p = pid in the pattern).
 */
#ifndef ZN_UTIL_LOG_H
#define ZN_UTIL_LOG_H

#include <stddef.h>
#include <stdint.h>

enum zn_log_level {
    ZN_LOG_NONE = 0,
    ZN_LOG_VERSION = 1, /* only the version banner */
    ZN_LOG_WARN = 2,
    ZN_LOG_INFO = 3,
    ZN_LOG_TRACE = 4,
};

/* Subsystems, as bits so ZINC_DEBUG_SUBSYS can name several. */
#define ZN_LOG_SUBSYS(X) \
    X(INIT, 0)           \
    X(BOOT, 1)           \
    X(NET, 2)            \
    X(SHM, 3)            \
    X(P2P, 4)            \
    X(PROXY, 5)          \
    X(COLL, 6)           \
    X(TUNE, 7)           \
    X(ENV, 8)            \
    X(ALLOC, 9)          \
    X(CALL, 10)          \
    X(GRAPH, 11)

enum zn_log_subsys {
#define ZN_X(name, bit) ZN_##name = 1u << (bit),
    ZN_LOG_SUBSYS(ZN_X)
#undef ZN_X
        ZN_ALL = ~0u
};

extern int zn_log_level_cur; /* read without a lock: set once, before threads log */
extern uint32_t zn_log_subsys_cur;

/* The rank shown in the prefix of this thread's messages (-1: none). */
extern _Thread_local int zn_log_rank;

/* Apply the values of ZINC_DEBUG (level), ZINC_DEBUG_SUBSYS and ZINC_DEBUG_FILE; the first call
 * also prints the version banner. Called by the parameter loader (util/param.c), which sits
 * above logging: logging never reads parameters itself, so the two never call each other. */
void zn_log_configure(const char *debug, const char *subsys, const char *file);

void zn_log_emit(int level, uint32_t subsys, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

#define zn_log_enabled(level, subsys) ((level) <= zn_log_level_cur && ((subsys)&zn_log_subsys_cur))

#define zn_log(level, subsys, ...)                                       \
    do {                                                                 \
        if (zn_log_enabled(level, subsys))                               \
            zn_log_emit(level, subsys, __FILE__, __LINE__, __VA_ARGS__); \
    } while (0)

#define zn_warn(subsys, ...)  zn_log(ZN_LOG_WARN, subsys, __VA_ARGS__)
#define zn_info(subsys, ...)  zn_log(ZN_LOG_INFO, subsys, __VA_ARGS__)
#define zn_trace(subsys, ...) zn_log(ZN_LOG_TRACE, subsys, __VA_ARGS__)

/* Hand every line (newline included, NUL-terminated) to sink instead of writing it to the
 * log file; NULL restores the file. */
void zn_log_set_sink(void (*sink)(const char *line));

/* The subsystem bits named by a comma-separated list ("INIT,NET", "^SHM", "ALL"). */
uint32_t zn_log_parse_subsys(const char *list);

/* Expand %h and %p in a ZINC_DEBUG_FILE pattern. */
void zn_log_expand_path(const char *pattern, char *out, size_t outlen);

#endif
