/* Error recording: the per-thread last error behind ncclGetLastError. */
#include "err.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local char last_error[ZN_ERRMSG_MAX];

static const char *result_names[] = {
    [ncclSuccess] = "no error",
    [ncclUnhandledCudaError] =
        "a CUDA call failed (ncclGetLastError and ZINC_DEBUG=WARN say which)",
    [ncclSystemError] = "a system call failed (ncclGetLastError and ZINC_DEBUG=WARN say which)",
    [ncclInternalError] = "internal error in zinc (a bug: please report it with the log)",
    [ncclInvalidArgument] = "invalid argument (ncclGetLastError names it)",
    [ncclInvalidUsage] = "invalid usage (ncclGetLastError says what)",
    [ncclRemoteError] = "a peer exited, aborted or could not be reached",
    [ncclInProgress] = "operation in progress",
    [ncclTimeout] = "a wait ran out of the time it was given",
};

const char *zn_result_str(ncclResult_t r)
{
    if ((unsigned)r < sizeof(result_names) / sizeof(result_names[0]) && result_names[r])
        return result_names[r];
    return "unknown result code";
}

ncclResult_t zn_error(ncclResult_t code, uint32_t subsys, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof(last_error), fmt, ap);
    va_end(ap);
    zn_log(ZN_LOG_WARN, subsys, "%s", last_error);
    return code;
}

const char *zn_last_error(void)
{
    return last_error;
}

void zn_clear_last_error(void)
{
    last_error[0] = 0;
}

void zn_set_last_error(const char *msg)
{
    snprintf(last_error, sizeof(last_error), "%s", msg);
}

void zn_err_trace(const char *file, int line, ncclResult_t r)
{
    zn_log(ZN_LOG_TRACE, ZN_ALL, "%s:%d -> %d", file, line, (int)r);
}

ncclResult_t zn_calloc_impl(void **out, size_t n, size_t size, const char *what)
{
    void *p = calloc(n ? n : 1, size);
    if (!p)
        return zn_error(ncclSystemError, ZN_ALLOC, "out of memory allocating %zu bytes for %s",
                        n * size, what);
    *out = p;
    return ncclSuccess;
}
