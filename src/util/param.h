/*
 * Typed parameters (see param_list.h). Read once, on first use, from the environment and the
 * config file; values that differ from the default are logged once at INFO/ENV.
 */
#ifndef ZN_UTIL_PARAM_H
#define ZN_UTIL_PARAM_H

#include <stddef.h>
#include <stdint.h>

enum zn_param_type { ZN_PT_INT, ZN_PT_SIZE, ZN_PT_BOOL, ZN_PT_STR };

struct zn_params {
#define ZN_PARAM_FIELD_INT                         int64_t
#define ZN_PARAM_FIELD_SIZE                        int64_t
#define ZN_PARAM_FIELD_BOOL                        int64_t
#define ZN_PARAM_FIELD_STR                         const char *
#define ZN_PARAM(field, type, name, alt, def, doc) ZN_PARAM_FIELD_##type field;
#include "param_list.h"
#undef ZN_PARAM
};

/* The description of one parameter, for zinc-info. */
struct zn_param_desc {
    const char *name;
    const char *alt_name; /* the NCCL_ name accepted as a fallback, or NULL */
    enum zn_param_type type;
    const char *def;
    const char *doc;
};

/* Parameters, loaded on first call. Never NULL. */
const struct zn_params *zn_params(void);

/* Parameter table and count (for zinc-info and tests). */
const struct zn_param_desc *zn_param_table(size_t *count);

/* The source text of a parameter's current value and where it came from ("env", "file",
 * "default"); for zinc-info. Returns NULL for an unknown name. */
const char *zn_param_source(const char *name, const char **origin);

/* Parse helpers, exposed for tests: size with K/M/G suffix, bool (0/1/yes/no/true/false). */
int zn_param_parse_size(const char *s, int64_t *out);
int zn_param_parse_bool(const char *s, int64_t *out);

/* Reload from the environment and the config file, and re-apply the logging parameters
 * (ncclResetDebugInit, tests). Not thread-safe against readers. */
void zn_params_reload(void);

#endif
