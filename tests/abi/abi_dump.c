/*
 * abi_dump -- prints the facts of the header the ref collectors were built against (cmake
 * -DZINC_ABI_REFRESH_HEADER=...), one "LANG<TAB>NAME<TAB>VALUE" line each: the format of
 * ref/nccl-2.30.7/facts.txt, which abi_check reads.
 */
#include <stdio.h>
#include <stdlib.h>

#include "facts.h"

static int dump(const char *lang, void (*fn)(struct za_facts *))
{
    struct za_facts f = { 0 };
    fn(&f);
    for (size_t i = 0; i < f.n; i++) printf("%s\t%s\t%s\n", lang, f.v[i].name, f.v[i].value);
    int failed = f.failed;
    za_facts_free(&f);
    return failed;
}

int main(void)
{
    int bad = dump("cxx", za_facts_ref_cxx) + dump("c", za_facts_ref_c);
    if (bad) fprintf(stderr, "abi_dump: a collector failed\n");
    return bad ? EXIT_FAILURE : EXIT_SUCCESS;
}
