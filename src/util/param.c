/*
 * Parameter loading. One pass over the table at first use: environment (ZINC_ name, then the
 * NCCL_ fallback), then the config file, then the default. Invalid values fall back to the
 * default with a warning, so a typo never stops a job but is never silent either.
 */
#include "param.h"
#include "log.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct zn_param_desc param_table[] = {
#define ZN_PARAM(field, type, name, alt, def, doc) { name, alt, ZN_PT_##type, def, doc },
#include "param_list.h"
#undef ZN_PARAM
};
#define NPARAMS (sizeof(param_table) / sizeof(param_table[0]))

static struct zn_params params;
static const char *param_text[NPARAMS];   /* the text each value was parsed from */
static const char *param_origin[NPARAMS]; /* "env", "file" or "default" */
static pthread_once_t params_once = PTHREAD_ONCE_INIT;

/* Config file entries, kept as "NAME=VALUE" strings. */
static char **file_entries;
static size_t file_nentries;

int zn_param_parse_size(const char *s, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 0);
    if (errno || end == s || v < 0) return -1;
    while (isspace((unsigned char)*end)) end++;
    int64_t mult = 1;
    switch (toupper((unsigned char)*end)) {
    case 'K':
        mult = 1ll << 10;
        end++;
        break;
    case 'M':
        mult = 1ll << 20;
        end++;
        break;
    case 'G':
        mult = 1ll << 30;
        end++;
        break;
    case 0: break;
    default: return -1;
    }
    if (*end == 'B' || *end == 'b') end++;
    if (*end) return -1;
    if (v > INT64_MAX / mult) return -1;
    *out = v * mult;
    return 0;
}

int zn_param_parse_bool(const char *s, int64_t *out)
{
    if (!strcmp(s, "1") || !strcasecmp(s, "yes") || !strcasecmp(s, "true") ||
        !strcasecmp(s, "on")) {
        *out = 1;
        return 0;
    }
    if (!strcmp(s, "0") || !strcasecmp(s, "no") || !strcasecmp(s, "false") ||
        !strcasecmp(s, "off")) {
        *out = 0;
        return 0;
    }
    return -1;
}

static int parse_int(const char *s, int64_t *out)
{
    if (!*s) { /* unset (see param.h) */
        *out = INT_MIN;
        return 0;
    }
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 0);
    if (errno || end == s) return -1;
    while (isspace((unsigned char)*end)) end++;
    if (*end) return -1;
    *out = v;
    return 0;
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s)) s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1])) *--e = 0;
    return s;
}

/* Read NAME=VALUE lines; '#' starts a comment. A missing file is not an error. */
static void load_file(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return;
    char line[1024];
    while (fgets(line, sizeof(line), f)) {
        char *hash = strchr(line, '#');
        if (hash) *hash = 0;
        char *s = trim(line);
        char *eq = strchr(s, '=');
        if (!*s || !eq) continue;
        *eq = 0;
        char *name = trim(s), *val = trim(eq + 1);
        char *entry;
        if (asprintf(&entry, "%s=%s", name, val) < 0) break;
        char **grown = realloc(file_entries, (file_nentries + 1) * sizeof(*grown));
        if (!grown) {
            free(entry);
            break;
        }
        file_entries = grown;
        file_entries[file_nentries++] = entry;
    }
    fclose(f);
}

static const char *file_lookup(const char *name)
{
    size_t len = strlen(name);
    /* Later lines win, as in a shell script. */
    for (size_t i = file_nentries; i-- > 0;)
        if (!strncmp(file_entries[i], name, len) && file_entries[i][len] == '=')
            return file_entries[i] + len + 1;
    return NULL;
}

static int parse_value(const struct zn_param_desc *d, const char *text, void *field)
{
    switch (d->type) {
    case ZN_PT_INT: return parse_int(text, field);
    case ZN_PT_SIZE: return zn_param_parse_size(text, field);
    case ZN_PT_BOOL: return zn_param_parse_bool(text, field);
    case ZN_PT_STR: *(const char **)field = text; return 0;
    }
    return -1;
}

static void *field_of(size_t i)
{
    /* Fields are laid out in table order; each is 8 bytes (int64_t or pointer). */
    return (char *)&params + i * 8;
}

_Static_assert(sizeof(struct zn_params) == NPARAMS * 8 && sizeof(const char *) == 8,
               "field_of() assumes 8-byte fields in table order");

static void load_all(void)
{
    for (size_t i = 0; i < file_nentries; i++) free(file_entries[i]);
    free(file_entries);
    file_entries = NULL;
    file_nentries = 0;
    const char *conf = getenv("ZINC_CONF_FILE");
    char path[4096];
    if (conf && *conf) {
        snprintf(path, sizeof(path), "%s", conf);
    } else {
        const char *home = getenv("HOME");
        snprintf(path, sizeof(path), "%s/.zinc.conf", home ? home : "");
    }
    load_file(path);

    for (size_t i = 0; i < NPARAMS; i++) {
        const struct zn_param_desc *d = &param_table[i];
        const char *text = getenv(d->name), *origin = "env";
        if (!text && d->alt_name) text = getenv(d->alt_name);
        if (!text) {
            origin = "file";
            text = file_lookup(d->name);
            if (!text && d->alt_name) text = file_lookup(d->alt_name);
        }
        if (text && parse_value(d, text, field_of(i)) != 0) {
            /* Logging is not up yet; report on stderr directly, once. */
            fprintf(stderr, "zinc WARN: %s=\"%s\" is not a valid %s value; using \"%s\"\n", d->name,
                    text,
                    d->type == ZN_PT_SIZE   ? "size"
                    : d->type == ZN_PT_BOOL ? "boolean"
                                            : "integer",
                    d->def);
            text = NULL;
        }
        if (!text) {
            origin = "default";
            text = d->def;
            parse_value(d, text, field_of(i));
        }
        param_text[i] = text;
        param_origin[i] = origin;
    }
}

static void init_once(void)
{
    load_all();
    zn_log_configure(params.debug, params.debug_subsys, params.debug_file);
    for (size_t i = 0; i < NPARAMS; i++)
        if (strcmp(param_text[i], param_table[i].def) != 0)
            zn_info(ZN_ENV, "%s set by %s to %s", param_table[i].name, param_origin[i],
                    param_text[i]);
}

const struct zn_params *zn_params(void)
{
    pthread_once(&params_once, init_once);
    return &params;
}

const struct zn_param_desc *zn_param_table(size_t *count)
{
    *count = NPARAMS;
    return param_table;
}

const char *zn_param_source(const char *name, const char **origin)
{
    zn_params();
    for (size_t i = 0; i < NPARAMS; i++)
        if (!strcmp(param_table[i].name, name)) {
            if (origin) *origin = param_origin[i];
            return param_text[i];
        }
    return NULL;
}

int zn_param_index(const char *key)
{
    if (!key) return -1;
    for (size_t i = 0; i < NPARAMS; i++)
        if (!strcmp(param_table[i].name, key) ||
            (param_table[i].alt_name && !strcmp(param_table[i].alt_name, key)))
            return (int)i;
    return -1;
}

const char *zn_param_text(size_t i, const char **origin)
{
    zn_params();
    if (origin) *origin = param_origin[i];
    return param_text[i];
}

int zn_param_number(size_t i, int64_t *out)
{
    zn_params();
    if (param_table[i].type != ZN_PT_STR) {
        *out = *(const int64_t *)field_of(i);
        return 0;
    }
    /* An empty STR is no number (parse_int would read it as an unset INT). */
    const char *text = param_text[i];
    int64_t v;
    if (!*text || parse_int(text, &v) != 0) return -1;
    *out = v;
    return 0;
}

int zn_param_format(size_t i, const char *doc_sep, char *buf, size_t len)
{
    const struct zn_param_desc *d = &param_table[i];
    const char *origin;
    const char *val = zn_param_text(i, &origin);
    return snprintf(buf, len, "%-20s = %-10s (%s; default \"%s\")%s%s%s%s", d->name,
                    *val ? val : "\"\"", origin, d->def, d->alt_name ? "  also " : "",
                    d->alt_name ? d->alt_name : "", doc_sep, d->doc);
}

void zn_params_reload(void)
{
    zn_params();
    load_all();
    zn_log_configure(params.debug, params.debug_subsys, params.debug_file);
}
