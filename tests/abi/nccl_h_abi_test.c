/*
 * abi_check -- proves that include/nccl.h is interchangeable with the reference NCCL header.
 *
 * Each collector reports facts (sizes, offsets, enumerator and macro values, initializer
 * contents, mangled function types) about one header in one language; see facts.h. Here the
 * lists of zinc's header are compared with the reference's, name by name, and every
 * difference is printed. Exit status 1 on any difference, on a fact present on one side only,
 * or on a collector that failed.
 *
 * Usage: abi_check [-v]   (-v also prints every fact compared)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "facts.h"

typedef void (*za_collector)(struct za_facts *out);

struct za_pair {
    const char *what;
    za_collector ref, zinc;
    /* zinc's collector reports only a few facts on purpose: compare those, skip the rest. */
    int zinc_is_subset;
};

static const struct za_pair pairs[] = {
    { "C++17, with the CUDA headers", za_facts_ref_cxx, za_facts_zinc_cxx, 0 },
    { "C++17, host-only (-DZINC_NO_CUDA_HEADERS)", za_facts_ref_cxx, za_facts_zinc_cxx_host, 0 },
    { "C11, with the CUDA headers", za_facts_ref_c, za_facts_zinc_c, 0 },
    { "C11, host-only (-DZINC_NO_CUDA_HEADERS)", za_facts_ref_c, za_facts_zinc_c_host, 0 },
    { "C11, host-only nccl.h then cuda_runtime.h", za_facts_ref_c, za_facts_zinc_c_nccl_then_cuda,
      1 },
    { "C11, cuda_runtime.h then host-only nccl.h", za_facts_ref_c, za_facts_zinc_c_cuda_then_nccl,
      1 },
};

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

static int compare(const struct za_pair *p, int verbose)
{
    struct za_facts ref = { 0 }, zinc = { 0 };
    int bad = 0;
    size_t compared = 0;

    printf("[%s]\n", p->what);
    p->ref(&ref);
    p->zinc(&zinc);
    if (ref.failed || zinc.failed) {
        printf("  collector failed (out of memory or a value over %d characters)\n",
               ZA_VALUE_MAX - 1);
        bad++;
    }
    bad += check_unique(&ref, "reference");
    bad += check_unique(&zinc, "zinc");

    for (size_t i = 0; i < ref.n; i++) {
        const struct za_fact *r = &ref.v[i], *z = find(&zinc, r->name);
        if (!z) {
            if (p->zinc_is_subset) continue;
            printf("  MISSING in zinc: %s (reference: %s)\n", r->name, r->value);
            bad++;
        } else if (strcmp(r->value, z->value) != 0) {
            printf("  DIFF %s\n       reference: %s\n       zinc:      %s\n", r->name, r->value,
                   z->value);
            bad++;
        } else if (verbose) {
            printf("  ok   %s = %s\n", r->name, r->value);
        }
        if (z) compared++;
    }
    for (size_t i = 0; i < zinc.n; i++)
        if (!find(&ref, zinc.v[i].name)) {
            printf("  MISSING in reference: %s (zinc: %s)\n", zinc.v[i].name, zinc.v[i].value);
            bad++;
        }
    if (compared == 0) {
        printf("  nothing compared\n");
        bad++;
    }
    printf("  %zu facts compared, %d problem%s\n", compared, bad, bad == 1 ? "" : "s");
    za_facts_free(&ref);
    za_facts_free(&zinc);
    return bad;
}

int main(int argc, char **argv)
{
    int verbose = argc > 1 && strcmp(argv[1], "-v") == 0;
    int bad = 0;

    printf("abi_check: reference %s\n           zinc      %s\n", ZA_REF_HEADER, ZA_ZINC_HEADER);
    for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++)
        bad += compare(&pairs[i], verbose);
    printf("abi_check: %s (%d problem%s)\n", bad ? "FAILED" : "PASSED", bad, bad == 1 ? "" : "s");
    return bad ? EXIT_FAILURE : EXIT_SUCCESS;
}
