/*
 * The state dump: ZINC_PROXY_DUMP_SIGNAL makes the process print what it holds -- every
 * communicator (host ones too), the proxy -- to its log. A hung rank is debugged with
 * `zinc-info --dump PID`.
 *
 * Whatever holds state registers a provider (zn_dump_add, refcounted per fn/arg pair) for as
 * long as it exists. While any provider is registered and the parameter names a signal, the
 * signal has a handler and one dump thread runs: the handler only writes a byte to a pipe
 * (async-signal-safe), the thread calls every provider in registration order. A provider may
 * take its own locks but must not call zn_dump_add/remove. With the parameter at 0 nothing is
 * installed and no thread runs.
 *
 * The handler is installed when the first provider registers and the previous disposition is
 * put back when the last goes, so a process that holds nothing of zinc's keeps the default
 * (deadly) action: zinc-info reads /proc/PID/status (SigCgt) and refuses such a process.
 */
#ifndef ZN_UTIL_DUMP_H
#define ZN_UTIL_DUMP_H

/* Register fn(arg) (one more reference if already registered). */
void zn_dump_add(void (*fn)(void *arg), void *arg);
/* Drop one reference; once the provider has none, fn is not running and will not run again. */
void zn_dump_remove(void (*fn)(void *arg), void *arg);
/* The signal the dump answers in this process (0: none installed). */
int zn_dump_signal(void);

#endif
