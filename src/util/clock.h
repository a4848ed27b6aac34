/* Time and deadlines. All waits in zinc are bounded by a deadline in monotonic nanoseconds. */
#ifndef ZN_UTIL_CLOCK_H
#define ZN_UTIL_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline int64_t zn_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

/* The deadline ZINC_TIMEOUT seconds from now. */
int64_t zn_deadline_from_now(void);
/* ZINC_TIMEOUT in nanoseconds (or what zn_set_timeout_s set). */
int64_t zn_timeout_ns(void);
/* Override ZINC_TIMEOUT for this copy of the library (seconds; 0 or less: back to ZINC_TIMEOUT). */
void zn_set_timeout_s(int64_t seconds);

/* Milliseconds left until deadline, clamped to [0, cap_ms]: a poll() timeout. */
static inline int zn_ms_left(int64_t deadline, int cap_ms)
{
    int64_t left = (deadline - zn_now_ns()) / 1000000;
    if (left < 0) return 0;
    return left > cap_ms ? cap_ms : (int)left;
}

#endif
