/*
 * facts_c.h -- the C11 collector. A .c file includes one nccl.h, then this file, which defines
 * the function named by ZA_FACTS_FN (unless ZA_NO_FACTS_FN is defined: then only the macros).
 *
 * C callers see the header through C's rules (enum types, enumerators of type int, NULL as
 * ((void *)0)), so the layout and values are checked in C as well as in C++. C has no mangled
 * names: ZA_TYPECODE spells a type with _Generic, in the Itanium codes where one applies, and
 * function types are left to the C++ collector. A name the header lacks breaks this file's
 * build, except macros, which are checked under #ifdef.
 */
#ifndef ZINC_TESTS_ABI_FACTS_C_H
#define ZINC_TESTS_ABI_FACTS_C_H

#include <stddef.h>

#include "facts.h"

/* The type of expression x after lvalue conversion (arrays become pointers). Handle types
 * are spelled by their struct tag, so that cudaStream_t declared by zinc's host-only header
 * must be the same struct CUstream_st pointer as the CUDA runtime's. */
#define ZA_TYPECODE(x) \
    _Generic((x), _Bool: "b", char: "c", signed char: "a", unsigned char: "h", short: "s",        \
             unsigned short: "t", int: "i", unsigned int: "j", long: "l", unsigned long: "m",     \
             long long: "x", unsigned long long: "y", float: "f", double: "d",                    \
             long double: "e", char *: "Pc", const char *: "PKc", void *: "Pv",                   \
             const void *: "PKv", struct ncclComm *: "P8ncclComm",                                \
             struct ncclWindow_vidmem *: "P17ncclWindow_vidmem",                                  \
             struct CUstream_st *: "P11CUstream_st", default: "?")

/* A char * value is a string literal (NCCL_SUFFIX); other pointers print as null/non-null. */
#define ZA_C_VALUE(out, name, x) \
    _Generic((x), char *: za_put_string, const char *: za_put_pointer, void *: za_put_pointer,    \
             const void *: za_put_pointer, float: za_put_float, double: za_put_float,             \
             long double: za_put_float, unsigned int: za_put_unsigned,                            \
             unsigned long: za_put_unsigned, unsigned long long: za_put_unsigned,                 \
             default: za_put_signed)(out, name, x)

#define ZA_TYPE(T)                                      \
    za_add(out, "sizeof(" #T ")", "%zu", sizeof(T));    \
    za_add(out, "alignof(" #T ")", "%zu", _Alignof(T)); \
    za_add(out, "type(" #T ")", "%s", ZA_TYPECODE(*(T *)0));
/* An enum type is compatible with the integer type the compiler chose, so _Generic finds it. */
#define ZA_ENUM(T) za_add(out, "underlying(" #T ")", "%s", ZA_TYPECODE((T)0));
#define ZA_MEMBER(T, m)                                               \
    za_add(out, "offsetof(" #T ", " #m ")", "%zu", offsetof(T, m));   \
    za_add(out, "sizeof(" #T "." #m ")", "%zu", sizeof(((T *)0)->m)); \
    za_add(out, "type(" #T "." #m ")", "%s", ZA_TYPECODE(((T *)0)->m));
#define ZA_EXPR(x)          \
    ZA_C_VALUE(out, #x, x); \
    za_add(out, "type(" #x ")", "%s", ZA_TYPECODE(x));
#define ZA_EXPR_MISSING(x) za_add(out, #x, "MISSING");
#define ZA_MACRO(M)         \
    ZA_C_VALUE(out, #M, M); \
    za_add(out, "type(" #M ")", "%s", ZA_TYPECODE(M));
#define ZA_MACRO_DEFINED(M)   za_add(out, "defined(" #M ")", "yes");
#define ZA_MACRO_UNDEFINED(M) za_add(out, "defined(" #M ")", "no");
#define ZA_ENUMERATOR(e)      za_put_signed(out, #e, e);
/* Function types are compared by the C++ collector only. */
#define ZA_FUNCTION(f)

#ifndef ZA_NO_FACTS_FN
void ZA_FACTS_FN(struct za_facts *out)
{
#ifdef NCCL_CONFIG_INITIALIZER
    const ncclConfig_t za_config = NCCL_CONFIG_INITIALIZER;
#define ZA_CONFIG_INIT(m) ZA_C_VALUE(out, "NCCL_CONFIG_INITIALIZER." #m, za_config.m);
#else
#define ZA_CONFIG_INIT(m) za_add(out, "NCCL_CONFIG_INITIALIZER." #m, "MISSING");
#endif
#ifdef NCCL_SIM_INFO_INITIALIZER
    const ncclSimInfo_t za_sim = NCCL_SIM_INFO_INITIALIZER;
#define ZA_SIM_INIT(m) ZA_C_VALUE(out, "NCCL_SIM_INFO_INITIALIZER." #m, za_sim.m);
#else
#define ZA_SIM_INIT(m) za_add(out, "NCCL_SIM_INFO_INITIALIZER." #m, "MISSING");
#endif
#include "facts.inc"
#include "ref_macros.inc"
#include "ref_enumerators.inc"
#include "ref_functions.inc"
}
#endif

#endif /* ZINC_TESTS_ABI_FACTS_C_H */
