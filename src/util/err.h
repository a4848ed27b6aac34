/*
 * Errors. Functions return ncclResult_t. The function that detects an error calls
 * zn_error(), which logs it once at WARN with its real cause and records it as this
 * thread's last error (ncclGetLastError); callers only pass the code up, with ZN_CHECK.
 */
#ifndef ZN_UTIL_ERR_H
#define ZN_UTIL_ERR_H

#include "nccl.h"
#include "log.h"

#include <stddef.h>

#define ZN_ERRMSG_MAX 1024

/* Record and log an error; returns code so it can be used as `return zn_error(...)`. */
ncclResult_t zn_error(ncclResult_t code, uint32_t subsys, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* This thread's last error message ("" if none). */
const char *zn_last_error(void);
void zn_clear_last_error(void);
/* Replace this thread's last error without logging (used to carry a comm's error over). */
void zn_set_last_error(const char *msg);

const char *zn_result_str(ncclResult_t r);

/* Trace one step of an error's unwinding at TRACE level: "file:line -> code". */
void zn_err_trace(const char *file, int line, ncclResult_t r);

/* Pass an error up. ncclInProgress is not an error. */
#define ZN_CHECK(call)                                             \
    do {                                                           \
        ncclResult_t zn_res_ = (call);                             \
        if (zn_res_ != ncclSuccess && zn_res_ != ncclInProgress) { \
            zn_err_trace(__FILE__, __LINE__, zn_res_);             \
            return zn_res_;                                        \
        }                                                          \
    } while (0)

/* Store an error in res and jump to a cleanup label. */
#define ZN_CHECK_GOTO(call, res, label)                        \
    do {                                                       \
        (res) = (call);                                        \
        if ((res) != ncclSuccess && (res) != ncclInProgress) { \
            zn_err_trace(__FILE__, __LINE__, (res));           \
            goto label;                                        \
        }                                                      \
    } while (0)

/* Allocation helpers that report failure through zn_error. */
ncclResult_t zn_calloc_impl(void **out, size_t n, size_t size, const char *what);
#define zn_calloc(out, n, what) zn_calloc_impl((void **)(out), (n), sizeof(**(out)), (what))

#endif
