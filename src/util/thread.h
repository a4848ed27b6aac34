/*
 * Starting threads. Background jobs that nobody joins (the bootstrap root, non-blocking init and
 * management calls) run detached, so that their resources go back to the system when they
 * return without a pthread_join that no caller could place.
 */
#ifndef ZN_UTIL_THREAD_H
#define ZN_UTIL_THREAD_H

#include <stddef.h>

/* Run fn(arg) on a new detached thread. Returns 0, or the pthread_create error number (the
 * thread did not start and fn will not run: the caller still owns arg). */
int zn_thread_start_detached(void *(*fn)(void *), void *arg);

/* Give the calling thread, one that polls for others (the proxy's progress thread), CPUs to run
 * on. cpus is a list such as "0-3,8": run there. "" or NULL: if the thread may run on one CPU
 * only (its process was bound to a core, as mpirun --bind-to core does), run on every CPU the
 * system lets the process use; else leave it. Two busy threads on one core take turns at the
 * scheduler's tick (4 ms at HZ=250): a proxy beside a main thread that spins in
 * cudaStreamSynchronize would answer a kernel's trigger milliseconds late. Writes the CPU list
 * the thread has now into desc. Returns 0, EINVAL for a list that does not parse or names no CPU
 * the system allows, or sched_setaffinity's errno. */
int zn_thread_spread(const char *cpus, char *desc, size_t len);

#endif
