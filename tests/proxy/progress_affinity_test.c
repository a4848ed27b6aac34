/* The proxy's progress thread gets CPUs of its own (zn_thread_spread).
 *   progress_affinity_test          the thread that starts the proxy is pinned to one CPU: the
 *                                   progress thread must run on every CPU the process had
 *   progress_affinity_test explicit ZINC_PROXY_CPUS names the last of them: exactly that one
 * The thread is found by its name (zinc-progress) in /proc/self/task; its affinity is set by
 * the thread itself once it runs, so the test waits for it (up to 20 s). */
#include "proxy/service.h"
#include "zt.h"

#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* "0-3,8" into set. */
static void parse_list(const char *s, cpu_set_t *set)
{
    CPU_ZERO(set);
    while (*s && *s != '\n') {
        char *end;
        long lo = strtol(s, &end, 10), hi = lo;
        if (*end == '-') hi = strtol(end + 1, &end, 10);
        for (long c = lo; c <= hi && c < CPU_SETSIZE; c++) CPU_SET((int)c, set);
        s = *end == ',' ? end + 1 : end;
    }
}

/* The allowed CPUs of this process's thread named name; 0 if found. */
static int thread_cpus(const char *name, cpu_set_t *out)
{
    DIR *d = opendir("/proc/self/task");
    if (!d) return -1;
    int found = -1;
    struct dirent *e;
    while (found && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[320], comm[64] = "", line[4096];
        snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        if (!fgets(comm, sizeof(comm), f)) comm[0] = '\0';
        fclose(f);
        comm[strcspn(comm, "\n")] = '\0';
        if (strcmp(comm, name) != 0) continue;
        snprintf(path, sizeof(path), "/proc/self/task/%s/status", e->d_name);
        if (!(f = fopen(path, "r"))) continue;
        while (fgets(line, sizeof(line), f))
            if (!strncmp(line, "Cpus_allowed_list:", 18)) {
                parse_list(line + 18 + strspn(line + 18, " \t"), out);
                found = 0;
            }
        fclose(f);
    }
    closedir(d);
    return found;
}

/* Wait until the progress thread's CPUs equal want (or contain it, superset). */
static int wait_for(const cpu_set_t *want, int superset, cpu_set_t *got)
{
    for (int i = 0; i < 2000; i++) {
        if (thread_cpus("zinc-progress", got) == 0) {
            cpu_set_t both;
            CPU_AND(&both, got, want);
            if (superset ? CPU_EQUAL(&both, want) : CPU_EQUAL(got, want)) return 1;
        }
        struct timespec ts = { 0, 10000000 };
        nanosleep(&ts, NULL);
    }
    return 0;
}

static cpu_set_t all; /* the CPUs the process may use, before any pin */

ZT_TEST(spread_from_one_cpu)
{
    int first = 0;
    while (!CPU_ISSET(first, &all)) first++;
    cpu_set_t one, got;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    ZT_ASSERT(sched_setaffinity(0, sizeof(one), &one) == 0);
    ZT_ASSERT(zn_proxy_acquire() == ncclSuccess);
    int ok = wait_for(&all, 1, &got);
    zn_proxy_release();
    ZT_ASSERT(sched_setaffinity(0, sizeof(all), &all) == 0);
    if (!ok)
        ZT_FAIL("the progress thread has %d CPUs, not the %d the process had", CPU_COUNT(&got),
                CPU_COUNT(&all));
}

ZT_TEST(explicit_list)
{
    int last = CPU_SETSIZE - 1;
    while (!CPU_ISSET(last, &all)) last--;
    cpu_set_t one, got;
    CPU_ZERO(&one);
    CPU_SET(last, &one);
    ZT_ASSERT(zn_proxy_acquire() == ncclSuccess);
    int ok = wait_for(&one, 0, &got);
    zn_proxy_release();
    if (!ok) ZT_FAIL("ZINC_PROXY_CPUS=%d: the progress thread has %d CPUs", last, CPU_COUNT(&got));
}

int main(int argc, char **argv)
{
    if (sched_getaffinity(0, sizeof(all), &all) != 0) return 1;
    if (CPU_COUNT(&all) < 2) {
        printf("SKIP: one CPU: nothing to spread to\n");
        return 77;
    }
    if (argc > 1 && !strcmp(argv[1], "explicit")) {
        int last = CPU_SETSIZE - 1;
        while (!CPU_ISSET(last, &all)) last--;
        char v[16];
        snprintf(v, sizeof(v), "%d", last);
        setenv("ZINC_PROXY_CPUS", v, 1); /* before the parameters are first read */
        static const struct zt_case c[] = { ZT_CASE(explicit_list) };
        return zt_run(c, 1);
    }
    static const struct zt_case c[] = { ZT_CASE(spread_from_one_cpu) };
    return zt_run(c, 1);
}
