/*
 * Starting threads. Background jobs that nobody joins (the bootstrap root, non-blocking init and
 * management calls) run detached, so that their resources go back to the system when they
 * return without a pthread_join that no caller could place.
 */
#ifndef ZN_UTIL_THREAD_H
#define ZN_UTIL_THREAD_H

/* Run fn(arg) on a new detached thread. Returns 0, or the pthread_create error number (the
 * thread did not start and fn will not run: the caller still owns arg). */
int zn_thread_start_detached(void *(*fn)(void *), void *arg);

#endif
