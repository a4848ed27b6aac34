#include "thread.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

int zn_thread_start_detached(void *(*fn)(void *), void *arg)
{
    pthread_attr_t attr;
    int err = pthread_attr_init(&attr);
    if (err) return err;
    err = pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t t;
    if (!err) err = pthread_create(&t, &attr, fn, arg);
    pthread_attr_destroy(&attr);
    return err;
}

/* "0-3,8" into set; -1 if it does not parse. */
static int parse_cpus(const char *s, cpu_set_t *set)
{
    CPU_ZERO(set);
    while (*s) {
        char *end;
        long lo = strtol(s, &end, 10), hi = lo;
        if (end == s || lo < 0) return -1;
        s = end;
        if (*s == '-') {
            hi = strtol(s + 1, &end, 10);
            if (end == s + 1 || hi < lo) return -1;
            s = end;
        }
        if (hi >= CPU_SETSIZE) return -1;
        for (long c = lo; c <= hi; c++) CPU_SET((int)c, set);
        if (*s == ',' && s[1])
            s++;
        else if (*s)
            return -1;
    }
    return CPU_COUNT(set) ? 0 : -1;
}

/* The set as a list such as "0-3,8". */
static void describe(const cpu_set_t *set, char *desc, size_t len)
{
    size_t at = 0;
    desc[0] = '\0';
    for (int c = 0; c < CPU_SETSIZE && at < len; c++) {
        if (!CPU_ISSET(c, set)) continue;
        int hi = c;
        while (hi + 1 < CPU_SETSIZE && CPU_ISSET(hi + 1, set)) hi++;
        int n = hi > c ? snprintf(desc + at, len - at, "%s%d-%d", at ? "," : "", c, hi)
                       : snprintf(desc + at, len - at, "%s%d", at ? "," : "", c);
        if (n < 0) break;
        at += (size_t)n;
        c = hi;
    }
}

int zn_thread_spread(const char *cpus, char *desc, size_t len)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) != 0) return errno;
    int change = 0;
    if (cpus && *cpus) {
        if (parse_cpus(cpus, &set) != 0) return EINVAL;
        change = 1;
    } else if (CPU_COUNT(&set) == 1) {
        /* The kernel keeps what the process's cpuset allows of a full set. */
        for (int c = 0; c < CPU_SETSIZE; c++) CPU_SET(c, &set);
        change = 1;
    }
    if (change && sched_setaffinity(0, sizeof(set), &set) != 0) return errno;
    if (change && sched_getaffinity(0, sizeof(set), &set) != 0) return errno;
    if (desc && len) describe(&set, desc, len);
    return 0;
}
