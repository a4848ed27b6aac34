/* facts_common.c -- the fact list shared by every collector (see facts.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "facts.h"

void za_add(struct za_facts *f, const char *name, const char *fmt, ...)
{
    if (f->n == f->cap) {
        size_t cap = f->cap ? 2 * f->cap : 256;
        struct za_fact *v = realloc(f->v, cap * sizeof(*v));
        if (!v) {
            f->failed = 1;
            return;
        }
        f->v = v;
        f->cap = cap;
    }
    struct za_fact *fact = &f->v[f->n++];
    fact->name = name;
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(fact->value, sizeof(fact->value), fmt, ap);
    va_end(ap);
    /* A truncated value could hide a difference past the cut, so it fails the test. */
    if (len < 0 || (size_t)len >= sizeof(fact->value)) f->failed = 1;
}

void za_facts_free(struct za_facts *f)
{
    free(f->v);
    f->v = NULL;
    f->n = f->cap = 0;
}

void za_put_signed(struct za_facts *f, const char *name, long long v)
{
    za_add(f, name, "%lld", v);
}

void za_put_unsigned(struct za_facts *f, const char *name, unsigned long long v)
{
    za_add(f, name, "%llu", v);
}

void za_put_float(struct za_facts *f, const char *name, long double v)
{
    za_add(f, name, "%La", v);
}

void za_put_string(struct za_facts *f, const char *name, const char *v)
{
    za_add(f, name, "\"%s\"", v);
}

void za_put_pointer(struct za_facts *f, const char *name, const void *v)
{
    za_add(f, name, "%s", v ? "non-null" : "null");
}
