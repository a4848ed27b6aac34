/*
 * abi_check -- proves that include/nccl.h is interchangeable with NCCL 2.30.7's nccl.h and keeps
 * the ABI of NCCL 2.28.9's wherever NCCL itself kept it.
 *
 * Each collector reports facts (sizes, offsets, enumerator and macro values, initializer
 * contents, mangled function types) about one header in one language; see facts.h. NCCL
 * 2.30.7's facts are read from ZA_REF230_FACTS (stored in the repository: the header is not on
 * the machines this runs on); 2.28.9's come from collectors built against the CUDA toolkit's
 * header when it was found (ZA_REF228_HEADER). Checks, language by language:
 *   - every fact of zinc's header equals the stored 2.30.7 fact, and neither side has a fact
 *     the other lacks;
 *   - every fact of the 2.28.9 header holds for zinc's, or NCCL changed it by 2.30.7 (the
 *     stored fact differs from 2.28.9's and equals zinc's): what a program built against the
 *     older header relies on is kept unless NCCL broke it too.
 * Exit status 1 on any problem, or on a collector that failed.
 *
 * Usage: abi_check [-v]   (-v also prints every fact compared)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "facts.h"

typedef void (*za_collector)(struct za_facts *out);

struct za_zinc {
    const char *what;
    const char *lang; /* "c" or "cxx": which stored facts and which 2.28.9 collector */
    za_collector fn;
    /* reports only a few facts on purpose: compare those, skip the rest */
    int subset;
};

static const struct za_zinc zincs[] = {
    { "C++17, with the CUDA headers", "cxx", za_facts_zinc_cxx, 0 },
    { "C++17, host-only (-DZINC_NO_CUDA_HEADERS)", "cxx", za_facts_zinc_cxx_host, 0 },
    { "C11, with the CUDA headers", "c", za_facts_zinc_c, 0 },
    { "C11, host-only (-DZINC_NO_CUDA_HEADERS)", "c", za_facts_zinc_c_host, 0 },
    { "C11, host-only nccl.h then cuda_runtime.h", "c", za_facts_zinc_c_nccl_then_cuda, 1 },
    { "C11, cuda_runtime.h then host-only nccl.h", "c", za_facts_zinc_c_cuda_then_nccl, 1 },
};

static int verbose;

static const struct za_fact *find(const struct za_facts *f, const char *name)
{
    for (size_t i = 0; i < f->n; i++)
        if (strcmp(f->v[i].name, name) == 0) return &f->v[i];
    return NULL;
}

/* A name reported twice would let one value hide the other. */
static int check_unique(const struct za_facts *f, const char *side)
{
    int bad = 0;
    for (size_t i = 0; i < f->n; i++)
        if (find(f, f->v[i].name) != &f->v[i]) {
            printf("  DUPLICATE %s fact: %s\n", side, f->v[i].name);
            bad++;
        }
    return bad;
}

/* The stored facts of one language: "LANG<TAB>NAME<TAB>VALUE" lines. The names point into
 * *text, which the caller frees after the list. */
static int load_stored(const char *path, const char *lang, struct za_facts *out, char **text)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        printf("  cannot open the stored facts %s\n", path);
        return 1;
    }
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    *text = malloc((size_t)len + 1);
    if (!*text || fread(*text, 1, (size_t)len, f) != (size_t)len) {
        fclose(f);
        printf("  cannot read %s\n", path);
        return 1;
    }
    fclose(f);
    (*text)[len] = 0;
    int bad = 0;
    for (char *line = strtok(*text, "\n"); line; line = strtok(NULL, "\n")) {
        char *name = strchr(line, '\t'), *value = name ? strchr(name + 1, '\t') : NULL;
        if (!value) {
            printf("  malformed line in %s: %s\n", path, line);
            bad++;
            continue;
        }
        *name++ = 0;
        *value++ = 0;
        if (strcmp(line, lang) == 0) za_add(out, name, "%s", value);
    }
    if (out->n < 100) {
        printf("  only %zu %s facts in %s\n", out->n, lang, path);
        bad++;
    }
    return bad + out->failed;
}

/* zinc's facts against the stored 2.30.7 facts: equal, name by name. */
static int against_230(const struct za_zinc *z, const struct za_facts *zinc,
                       const struct za_facts *ref)
{
    int bad = 0;
    size_t compared = 0;
    for (size_t i = 0; i < ref->n; i++) {
        const struct za_fact *r = &ref->v[i], *m = find(zinc, r->name);
        if (!m) {
            if (z->subset) continue;
            printf("  MISSING in zinc: %s (2.30.7: %s)\n", r->name, r->value);
            bad++;
            continue;
        }
        compared++;
        if (strcmp(r->value, m->value) != 0) {
            printf("  DIFF %s\n       2.30.7: %s\n       zinc:   %s\n", r->name, r->value,
                   m->value);
            bad++;
        } else if (verbose) {
            printf("  ok   %s = %s\n", r->name, r->value);
        }
    }
    for (size_t i = 0; i < zinc->n; i++)
        if (!find(ref, zinc->v[i].name)) {
            printf("  MISSING in 2.30.7: %s (zinc: %s)\n", zinc->v[i].name, zinc->v[i].value);
            bad++;
        }
    if (compared == 0) {
        printf("  nothing compared with 2.30.7\n");
        bad++;
    }
    printf("  2.30.7: %zu facts compared, %d problem%s\n", compared, bad, bad == 1 ? "" : "s");
    return bad;
}

#ifdef ZA_REF228_HEADER
/* The 2.28.9 header's facts hold for zinc's, except where 2.30.7 changed them. */
static int against_228(const struct za_zinc *z, const struct za_facts *zinc,
                       const struct za_facts *ref230)
{
    struct za_facts ref = { 0 };
    if (strcmp(z->lang, "cxx") == 0)
        za_facts_ref_cxx(&ref);
    else
        za_facts_ref_c(&ref);
    int bad = ref.failed + check_unique(&ref, "2.28.9");
    size_t kept = 0, changed = 0;
    for (size_t i = 0; i < ref.n; i++) {
        const struct za_fact *r = &ref.v[i], *m = find(zinc, r->name), *s = find(ref230, r->name);
        const char *mv = m ? m->value : "MISSING", *sv = s ? s->value : "MISSING";
        if (!m && z->subset) continue;
        if (strcmp(r->value, mv) == 0) {
            kept++;
        } else if (strcmp(sv, r->value) != 0 && strcmp(sv, mv) == 0) {
            changed++;
            if (verbose) printf("  changed by NCCL  %s: %s -> %s\n", r->name, r->value, mv);
        } else {
            printf("  DIFF from 2.28.9 %s\n       2.28.9: %s\n       2.30.7: %s\n       zinc:   "
                   "%s\n",
                   r->name, r->value, sv, mv);
            bad++;
        }
    }
    if (kept == 0) {
        printf("  nothing compared with 2.28.9\n");
        bad++;
    }
    printf("  2.28.9: %zu facts kept, %zu changed as NCCL changed them, %d problem%s\n", kept,
           changed, bad, bad == 1 ? "" : "s");
    za_facts_free(&ref);
    return bad;
}
#endif

static int check(const struct za_zinc *z)
{
    struct za_facts zinc = { 0 }, ref230 = { 0 };
    char *text = NULL;
    printf("[%s]\n", z->what);
    z->fn(&zinc);
    int bad = zinc.failed + check_unique(&zinc, "zinc");
    if (zinc.failed)
        printf("  collector failed (out of memory or a value over %d characters)\n",
               ZA_VALUE_MAX - 1);
    bad += load_stored(ZA_REF230_FACTS, z->lang, &ref230, &text);
    if (ref230.n) {
        bad += against_230(z, &zinc, &ref230);
#ifdef ZA_REF228_HEADER
        bad += against_228(z, &zinc, &ref230);
#endif
    }
    za_facts_free(&zinc);
    za_facts_free(&ref230);
    free(text);
    return bad;
}

int main(int argc, char **argv)
{
    verbose = argc > 1 && strcmp(argv[1], "-v") == 0;
    int bad = 0;
    printf("abi_check: zinc    %s\n           2.30.7  %s\n", ZA_ZINC_HEADER, ZA_REF230_FACTS);
#ifdef ZA_REF228_HEADER
    printf("           2.28.9  %s\n", ZA_REF228_HEADER);
#else
    printf("           2.28.9  not found: not compared\n");
#endif
    for (size_t i = 0; i < sizeof(zincs) / sizeof(zincs[0]); i++) bad += check(&zincs[i]);
    printf("abi_check: %s (%d problem%s)\n", bad ? "FAILED" : "PASSED", bad, bad == 1 ? "" : "s");
    return bad ? EXIT_FAILURE : EXIT_SUCCESS;
}
