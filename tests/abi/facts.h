/*
 * facts.h -- what the ABI test's translation units report about one nccl.h.
 *
 * A fact is a name ("sizeof(ncclConfig_t)", "ncclAllReduce.type") and its value as text. Each
 * collector is compiled against one header, in one language, and fills a list; nccl_h_abi_test.c
 * compares the lists of the reference header and of zinc's header name by name. Values are
 * text so that integers, floats, mangled type names and "MISSING" compare the same way.
 */
#ifndef ZINC_TESTS_ABI_FACTS_H
#define ZINC_TESTS_ABI_FACTS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ZA_VALUE_MAX 512

struct za_fact {
    const char *name; /* a string literal */
    char value[ZA_VALUE_MAX];
};

struct za_facts {
    struct za_fact *v;
    size_t n, cap;
    int failed; /* out of memory or a value longer than ZA_VALUE_MAX */
};

/* Append one fact; the name must outlive the list (string literals do). */
void za_add(struct za_facts *f, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void za_facts_free(struct za_facts *f);

/* Value printers shared by the C collectors, picked by ZA_C_VALUE's _Generic. */
void za_put_signed(struct za_facts *f, const char *name, long long v);
void za_put_unsigned(struct za_facts *f, const char *name, unsigned long long v);
void za_put_float(struct za_facts *f, const char *name, long double v);
void za_put_string(struct za_facts *f, const char *name, const char *v);
void za_put_pointer(struct za_facts *f, const char *name, const void *v);

/* The collectors, one per (header, language, configuration); see CMakeLists.txt. */
void za_facts_ref_cxx(struct za_facts *out);
void za_facts_zinc_cxx(struct za_facts *out);
void za_facts_zinc_cxx_host(struct za_facts *out);
void za_facts_ref_c(struct za_facts *out);
void za_facts_zinc_c(struct za_facts *out);
void za_facts_zinc_c_host(struct za_facts *out);
void za_facts_zinc_c_nccl_then_cuda(struct za_facts *out);
void za_facts_zinc_c_cuda_then_nccl(struct za_facts *out);

#ifdef __cplusplus
}
#endif

#endif /* ZINC_TESTS_ABI_FACTS_H */
