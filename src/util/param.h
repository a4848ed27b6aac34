/*
 * Typed parameters (see param_list.h). Read once, on first use, from the environment and the
 * config file; values that differ from the default are logged once at INFO/ENV.
 */
#ifndef ZN_UTIL_PARAM_H
#define ZN_UTIL_PARAM_H

#include <stddef.h>
#include <stdint.h>

/* An INT parameter whose text is empty (the default of those that only override something
 * when set) reads as INT_MIN, NCCL's NCCL_CONFIG_UNDEF_INT. */
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

/* Index in zn_param_table() of the parameter whose ZINC_ name or NCCL_ fallback name is key;
 * -1 if there is none (or key is NULL). */
int zn_param_index(const char *key);

/* The source text of parameter i's current value and its origin, as zn_param_source(). */
const char *zn_param_text(size_t i, const char **origin);

/* Parameter i's current value as a number: INT and SIZE as read (SIZE in bytes; an unset INT is
 * INT_MIN), BOOL as 0 or 1, STR when its whole text is a decimal, hex (0x) or octal (0) int64.
 * Returns -1 (and leaves out alone) for a STR whose text is not such a number. */
int zn_param_number(size_t i, int64_t *out);

/* How zinc-info and ncclParamDumpAll show the table: ZN_PARAM_ORDER says where values come
 * from; zn_param_format() writes parameter i's entry into buf,
 *   NAME = VALUE (ORIGIN; default "DEF")  also NCCL_NAME<doc_sep>DOC
 * truncated to len bytes (NUL included); returns the length the whole entry needs, as
 * snprintf does. */
#define ZN_PARAM_ORDER "environment, then ZINC_CONF_FILE or ~/.zinc.conf, then default"
int zn_param_format(size_t i, const char *doc_sep, char *buf, size_t len);

/* Parse helpers, exposed for tests: size with K/M/G suffix, bool (0/1/yes/no/true/false). */
int zn_param_parse_size(const char *s, int64_t *out);
int zn_param_parse_bool(const char *s, int64_t *out);

/* Reload from the environment and the config file, and re-apply the logging parameters
 * (ncclResetDebugInit, tests). Not thread-safe against readers. */
void zn_params_reload(void);

#endif
