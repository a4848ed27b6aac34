/*
 * Size arithmetic that reports overflow instead of wrapping. A size that comes from a user (or
 * a peer) may be anything up to SIZE_MAX, and `(size + 4095) & ~4095` then wraps to a tiny
 * number: a small segment gets made and the caller goes on to use SIZE_MAX bytes of it. Every
 * round-up of such a size goes through these.
 */
#ifndef ZN_UTIL_SIZE_H
#define ZN_UTIL_SIZE_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

/* *out = x rounded up to a multiple of align (any non-zero align); 0, or -1 if that does not
 * fit a size_t (then *out is left alone). */
static inline int zn_round_up(size_t x, size_t align, size_t *out)
{
    size_t r = x % align;
    if (r == 0) {
        *out = x;
        return 0;
    }
    if (x > SIZE_MAX - (align - r)) return -1;
    *out = x + (align - r);
    return 0;
}

/* *out = a + b; 0, or -1 on overflow (then *out is left alone). */
static inline int zn_add_size(size_t a, size_t b, size_t *out)
{
    size_t s;
    if (__builtin_add_overflow(a, b, &s)) return -1;
    *out = s;
    return 0;
}

/* Whether every page of [p, p + len) is mapped in this process: 1 yes, 0 no (the range
 * wraps, or a page of it is not mapped). For a size a user declares for a buffer that a net
 * registers or a peer writes into: a size larger than the buffer shows up here when it runs
 * past the mapping (not when it stays inside a larger mapping, e.g. the heap). msync with
 * MS_ASYNC changes nothing (a no-op since Linux 2.6.19) and fails with ENOMEM on an unmapped
 * page, checking the range in one call however large it is. */
static inline int zn_host_range_mapped(const void *p, size_t len)
{
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), a = (uintptr_t)p, end;
    if (!len) return 1;
    if (__builtin_add_overflow(a, len, &end) || end > UINTPTR_MAX - page) return 0;
    uintptr_t start = a & ~(page - 1);
    end = (end + page - 1) & ~(page - 1);
    return msync((void *)start, end - start, MS_ASYNC) == 0 || errno != ENOMEM;
}

#endif
