/*
 * NCCL 2.30's parameter API over zinc's parameter table (util/param_list.h): what zinc-info
 * prints, readable by a program.
 *
 * Keys: a parameter's ZINC_ name or its NCCL_ fallback name, so a program written for NCCL
 * that asks for "NCCL_DEBUG" gets ZINC_DEBUG's value. ncclParamGetAllParameterKeys lists the
 * ZINC_ names only, one per parameter. NCCL limits its list and its dump to the parameters its
 * documentation publishes unless NCCL_PARAM_DUMP_ALL is set; every zinc parameter is
 * documented (docs/configuration.md), so zinc always lists all of them and ignores that
 * variable.
 *
 * Values are the ones in effect: the environment, then the config file, then the default.
 *   - Typed getters (ncclParamGetI8 ... U64) read INT and SIZE parameters as numbers (a SIZE
 *     in bytes, "512K" reads 524288), BOOL ones as 0 or 1, and STR ones whose whole text is an
 *     integer (decimal, 0x hex or 0 octal) as that integer; any other STR is
 *     ncclInvalidArgument, as is a value outside the requested type's range. An INT override
 *     that is unset (empty text) reads as INT_MIN, NCCL's NCCL_CONFIG_UNDEF_INT. NCCL accepts
 *     only the getter of a parameter's own type; zinc's parameters are all 64-bit, so zinc
 *     checks the range instead, and a program that works on NCCL works here.
 *   - Text (ncclParamGetStr, ncclParamGetParameter): a STR's text as it is, numbers in decimal
 *     (a SIZE in bytes, a BOOL as 0 or 1, an unset INT as ""), so that what a program parses
 *     does not depend on how the user wrote the value. NCCL's ncclParamGetStr accepts string
 *     parameters only; zinc's gives every parameter's text.
 *   - ncclParamGet copies the value's bytes: an int64_t (8 bytes) for INT, SIZE and BOOL, the
 *     text with its NUL for STR. A buffer too small is ncclInvalidArgument and nothing is
 *     copied, as in NCCL; *len then says how many bytes were needed (NCCL sets it to 0).
 *
 * Errors are ncclInvalidArgument with the message in ncclGetLastError. An unknown key is logged
 * at INFO (ENV), as NCCL logs it: a program that probes for a parameter zinc does not have (NCCL
 * has hundreds) is not failing. Every other error is logged at WARN.
 *
 * Strings returned to the caller stay valid until the same thread's next call of the same
 * function: each thread has its own buffers, freed when it exits.
 */
#include "group.h"
#include "util/param.h"

#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- handles ---------------------------------------------------------------------------- */

/* A handle is the address of the parameter's entry in zn_param_table(), which lives as long
 * as the process: nothing to allocate or free, and a handle that is not one is recognized. */
static ncclParamHandle_t handle_of(size_t i)
{
    size_t n;
    return (ncclParamHandle_t)(uintptr_t)&zn_param_table(&n)[i];
}

static ncclResult_t handle_index(const char *fn, ncclParamHandle_t h, size_t *out)
{
    size_t n;
    const struct zn_param_desc *t = zn_param_table(&n);
    uintptr_t off = (uintptr_t)h - (uintptr_t)t;
    if (!h) return zn_error(ncclInvalidArgument, ZN_ENV, "%s: h is NULL", fn);
    if ((uintptr_t)h < (uintptr_t)t || off % sizeof(*t) != 0 || off / sizeof(*t) >= n)
        return zn_error(ncclInvalidArgument, ZN_ENV, "%s: h %p is not a handle of ncclParamBind",
                        fn, (void *)h);
    *out = off / sizeof(*t);
    return ncclSuccess;
}

static const struct zn_param_desc *desc_of(size_t i)
{
    size_t n;
    return &zn_param_table(&n)[i];
}

static ncclResult_t unknown_key(const char *fn, const char *key)
{
    char msg[ZN_ERRMSG_MAX];
    snprintf(msg, sizeof(msg), "%s: no parameter is named \"%s\" (zinc-info params lists them)", fn,
             key);
    zn_set_last_error(msg);
    zn_info(ZN_ENV, "%s", msg);
    return ncclInvalidArgument;
}

/* ---- per-thread results ----------------------------------------------------------------- */

/* Buffers of the strings handed out, one set per thread. A pthread key rather than
 * _Thread_local pointers: its destructor frees them when the thread exits, where plain
 * thread-local pointers would leak one set per thread that ever asked. */
struct param_tls {
    char *str; /* ncclParamGetStr */
    size_t str_cap;
    char *value; /* ncclParamGetParameter */
    size_t value_cap;
    const char **keys; /* ncclParamGetAllParameterKeys */
};

static pthread_key_t tls_key;
static int tls_key_err;
static pthread_once_t tls_once = PTHREAD_ONCE_INIT;

static void tls_free(void *p)
{
    struct param_tls *t = p;
    free(t->str);
    free(t->value);
    free(t->keys);
    free(t);
}

static void tls_init(void)
{
    tls_key_err = pthread_key_create(&tls_key, tls_free);
}

static ncclResult_t get_tls(const char *fn, struct param_tls **out)
{
    pthread_once(&tls_once, tls_init);
    if (tls_key_err)
        return zn_error(ncclSystemError, ZN_ENV, "%s: pthread_key_create: %s", fn,
                        strerror(tls_key_err));
    struct param_tls *t = pthread_getspecific(tls_key);
    if (!t) {
        ZN_CHECK(zn_calloc(&t, 1, "the parameter API's per-thread results"));
        int rc = pthread_setspecific(tls_key, t);
        if (rc) {
            free(t);
            return zn_error(ncclSystemError, ZN_ENV, "%s: pthread_setspecific: %s", fn,
                            strerror(rc));
        }
    }
    *out = t;
    return ncclSuccess;
}

/* Copy text into a per-thread buffer (grown as needed) and point *out at it. */
static ncclResult_t keep_text(const char *fn, char **buf, size_t *cap, const char *text,
                              const char **out)
{
    size_t n = strlen(text) + 1;
    if (n > *cap) {
        char *grown = realloc(*buf, n);
        if (!grown)
            return zn_error(ncclSystemError, ZN_ALLOC, "%s: out of memory for a %zu-byte value", fn,
                            n);
        *buf = grown;
        *cap = n;
    }
    memcpy(*buf, text, n);
    *out = *buf;
    return ncclSuccess;
}

/* ---- values ----------------------------------------------------------------------------- */

/* Parameter i's value as text (see the top of the file); num holds the digits of a number. */
static const char *value_text(size_t i, char num[24])
{
    const struct zn_param_desc *d = desc_of(i);
    const char *text = zn_param_text(i, NULL);
    int64_t v;
    if (d->type == ZN_PT_STR || (d->type == ZN_PT_INT && !*text) || zn_param_number(i, &v) != 0)
        return text;
    snprintf(num, 24, "%lld", (long long)v);
    return num;
}

static ncclResult_t read_number(const char *fn, ncclParamHandle_t h, const void *out, int64_t lo,
                                int64_t hi, const char *type, int64_t *v)
{
    size_t i;
    ZN_CHECK(handle_index(fn, h, &i));
    if (!out) return zn_error(ncclInvalidArgument, ZN_ENV, "%s: out is NULL", fn);
    const struct zn_param_desc *d = desc_of(i);
    const char *text = zn_param_text(i, NULL);
    if (zn_param_number(i, v) != 0)
        return zn_error(ncclInvalidArgument, ZN_ENV, "%s: %s = \"%s\" is not an integer", fn,
                        d->name, text);
    if (*v < lo || *v > hi) {
        if (d->type == ZN_PT_INT && !*text)
            return zn_error(ncclInvalidArgument, ZN_ENV,
                            "%s: %s is unset, which reads as INT_MIN, outside the range of %s", fn,
                            d->name, type);
        return zn_error(ncclInvalidArgument, ZN_ENV, "%s: %s = %lld is outside the range of %s", fn,
                        d->name, (long long)*v, type);
    }
    return ncclSuccess;
}

/* ---- entry points ----------------------------------------------------------------------- */

ZN_API(ncclResult_t, ncclParamBind, ncclParamHandle_t *out, const char *key)
{
    zn_params(); /* the log is set up before anything is logged */
    if (!out) return zn_error(ncclInvalidArgument, ZN_ENV, "ncclParamBind: out is NULL");
    if (!key) return zn_error(ncclInvalidArgument, ZN_ENV, "ncclParamBind: key is NULL");
    int i = zn_param_index(key);
    if (i < 0) return unknown_key("ncclParamBind", key);
    *out = handle_of((size_t)i);
    return ncclSuccess;
}

/* The eight typed getters: the value, range-checked against the type. */
#define PARAM_GETTER(suffix, ctype, lo, hi)                                            \
    ZN_API(ncclResult_t, ncclParamGet##suffix, ncclParamHandle_t h, ctype *out)        \
    {                                                                                  \
        int64_t v;                                                                     \
        ZN_CHECK(read_number("ncclParamGet" #suffix, h, out, (lo), (hi), #ctype, &v)); \
        *out = (ctype)v;                                                               \
        return ncclSuccess;                                                            \
    }
PARAM_GETTER(I8, int8_t, INT8_MIN, INT8_MAX)
PARAM_GETTER(I16, int16_t, INT16_MIN, INT16_MAX)
PARAM_GETTER(I32, int32_t, INT32_MIN, INT32_MAX)
PARAM_GETTER(I64, int64_t, INT64_MIN, INT64_MAX)
PARAM_GETTER(U8, uint8_t, 0, UINT8_MAX)
PARAM_GETTER(U16, uint16_t, 0, UINT16_MAX)
PARAM_GETTER(U32, uint32_t, 0, UINT32_MAX)
PARAM_GETTER(U64, uint64_t, 0, INT64_MAX)
#undef PARAM_GETTER

ZN_API(ncclResult_t, ncclParamGetStr, ncclParamHandle_t h, const char **out)
{
    size_t i;
    struct param_tls *t;
    char num[24];
    ZN_CHECK(handle_index("ncclParamGetStr", h, &i));
    if (!out) return zn_error(ncclInvalidArgument, ZN_ENV, "ncclParamGetStr: out is NULL");
    ZN_CHECK(get_tls("ncclParamGetStr", &t));
    return keep_text("ncclParamGetStr", &t->str, &t->str_cap, value_text(i, num), out);
}

ZN_API(ncclResult_t, ncclParamGet, ncclParamHandle_t h, void *out, int maxLen, int *len)
{
    size_t i;
    ZN_CHECK(handle_index("ncclParamGet", h, &i));
    if (!out) return zn_error(ncclInvalidArgument, ZN_ENV, "ncclParamGet: out is NULL");
    if (!len) return zn_error(ncclInvalidArgument, ZN_ENV, "ncclParamGet: len is NULL");
    const struct zn_param_desc *d = desc_of(i);
    int64_t v = 0;
    const void *bytes = &v;
    size_t need = sizeof(v);
    if (d->type == ZN_PT_STR) {
        bytes = zn_param_text(i, NULL);
        need = strlen(bytes) + 1;
    } else {
        zn_param_number(i, &v); /* never fails for a number type */
    }
    if (need > INT_MAX)
        return zn_error(ncclInvalidArgument, ZN_ENV,
                        "ncclParamGet: %s's value is %zu bytes, more than an int counts", d->name,
                        need);
    if (maxLen < 0 || (size_t)maxLen < need) {
        *len = (int)need;
        return zn_error(ncclInvalidArgument, ZN_ENV,
                        "ncclParamGet: maxLen %d is less than the %zu bytes of %s's value", maxLen,
                        need, d->name);
    }
    memcpy(out, bytes, need);
    *len = (int)need;
    return ncclSuccess;
}

ZN_API(ncclResult_t, ncclParamGetParameter, const char *key, const char **value, int *valueLen)
{
    zn_params();
    if (!key) return zn_error(ncclInvalidArgument, ZN_ENV, "ncclParamGetParameter: key is NULL");
    if (!value)
        return zn_error(ncclInvalidArgument, ZN_ENV, "ncclParamGetParameter: value is NULL");
    if (!valueLen)
        return zn_error(ncclInvalidArgument, ZN_ENV, "ncclParamGetParameter: valueLen is NULL");
    int i = zn_param_index(key);
    if (i < 0) {
        /* NCCL clears both outputs for an unknown key; programs may test *value alone. */
        *value = NULL;
        *valueLen = 0;
        return unknown_key("ncclParamGetParameter", key);
    }
    struct param_tls *t;
    char num[24];
    const char *text;
    ZN_CHECK(get_tls("ncclParamGetParameter", &t));
    ZN_CHECK(keep_text("ncclParamGetParameter", &t->value, &t->value_cap,
                       value_text((size_t)i, num), &text));
    *value = text;
    *valueLen = (int)strlen(text);
    return ncclSuccess;
}

ZN_API(ncclResult_t, ncclParamGetAllParameterKeys, const char ***table, int *tableLen)
{
    if (!table)
        return zn_error(ncclInvalidArgument, ZN_ENV, "ncclParamGetAllParameterKeys: table is NULL");
    if (!tableLen)
        return zn_error(ncclInvalidArgument, ZN_ENV,
                        "ncclParamGetAllParameterKeys: tableLen is NULL");
    size_t n;
    const struct zn_param_desc *d = zn_param_table(&n);
    struct param_tls *t;
    ZN_CHECK(get_tls("ncclParamGetAllParameterKeys", &t));
    /* The names are the table's own strings; the array of pointers is the thread's, refilled
     * on every call since the caller may have written into it. One extra NULL ends it. */
    if (!t->keys) ZN_CHECK(zn_calloc(&t->keys, n + 1, "the parameter key table"));
    for (size_t i = 0; i < n; i++) t->keys[i] = d[i].name;
    t->keys[n] = NULL;
    *table = t->keys;
    *tableLen = (int)n;
    return ncclSuccess;
}

/* NCCL prints its dump with printf whatever NCCL_DEBUG says. zinc's library never writes to
 * stdout, so the dump goes to zinc's log (stderr or ZINC_DEBUG_FILE) as INFO ENV lines, one per
 * parameter, but past the level and subsystem filters: a program that asks for the dump gets it
 * at the default ZINC_DEBUG=WARN too. */
ZN_API(void, ncclParamDumpAll, void)
{
    size_t n;
    zn_params();
    zn_param_table(&n);
    zn_log_emit(ZN_LOG_INFO, ZN_ENV, __FILE__, __LINE__,
                "ncclParamDumpAll: %zu parameters (" ZN_PARAM_ORDER "):", n);
    for (size_t i = 0; i < n; i++) {
        char line[2048]; /* a log line holds no more */
        zn_param_format(i, ": ", line, sizeof(line));
        zn_log_emit(ZN_LOG_INFO, ZN_ENV, __FILE__, __LINE__, "%s", line);
    }
}
