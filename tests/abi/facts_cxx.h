/*
 * facts_cxx.h -- the C++ collector. A .cc file includes one nccl.h, then this file, which
 * defines the function named by ZA_FACTS_FN.
 *
 * C++ is used because typeid(...).name() gives the Itanium-mangled name of a type, which
 * spells out every parameter and return type by its struct tag or typedef-for-linkage name:
 * two function declarations agree exactly when these strings do.
 *
 * A function or enumerator the header lacks must be reported, not break the build, so each
 * one is probed by name: every name from gen/ref_functions.inc and gen/ref_enumerators.inc
 * is also declared here as an incomplete struct. Where the header declares the name, the
 * function or enumerator hides the struct (as `stat` hides `struct stat`) and
 * za_probe<name> selects the overload taking a value; where it does not, the name denotes
 * the struct and the overload taking a type reports MISSING.
 */
#ifndef ZINC_TESTS_ABI_FACTS_CXX_H
#define ZINC_TESTS_ABI_FACTS_CXX_H

#include <cstddef>
#include <type_traits>
#include <typeinfo>

#include "facts.h"

/* Naming ncclResetDebugInit, which both headers mark deprecated, is the point here. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#define ZA_FUNCTION(f)   struct f;
#define ZA_ENUMERATOR(e) struct e;
#include "ref_functions.inc"
#include "ref_enumerators.inc"
#undef ZA_FUNCTION
#undef ZA_ENUMERATOR

namespace
{

/* typeid(za_symbol<&f>).name() mangles the address of f as a template argument, which for
 * a C++-linkage function includes its parameter types and for an extern "C" one does not:
 * it tells apart the symbol names the two would link against. */
template <auto F> struct za_symbol {
};

template <class T> void za_value(za_facts *out, const char *name, const T &v)
{
    if constexpr (std::is_array_v<T>) {
        za_add(out, name, "\"%s\"", v); /* a string literal */
    } else if constexpr (std::is_pointer_v<T>) {
        za_add(out, name, "%s", v ? "non-null" : "null");
    } else if constexpr (std::is_floating_point_v<T>) {
        za_add(out, name, "%La", static_cast<long double>(v));
    } else if constexpr (std::is_enum_v<T>) {
        za_add(out, name, "%lld", static_cast<long long>(v));
    } else if constexpr (std::is_signed_v<T>) {
        za_add(out, name, "%lld", static_cast<long long>(v));
    } else {
        za_add(out, name, "%llu", static_cast<unsigned long long>(v));
    }
}

template <auto F> void za_probe(za_facts *out, const char *type_name, const char *symbol_name)
{
    za_add(out, type_name, "%s", typeid(decltype(F)).name());
    za_add(out, symbol_name, "%s", typeid(za_symbol<F>).name());
}

template <class Missing>
void za_probe(za_facts *out, const char *type_name, const char *symbol_name)
{
    za_add(out, type_name, "MISSING");
    za_add(out, symbol_name, "MISSING");
}

template <auto E> void za_enum_probe(za_facts *out, const char *type_name, const char *value_name)
{
    za_add(out, type_name, "%s", typeid(decltype(E)).name());
    za_value(out, value_name, E);
}

template <class Missing>
void za_enum_probe(za_facts *out, const char *type_name, const char *value_name)
{
    za_add(out, type_name, "MISSING");
    za_add(out, value_name, "MISSING");
}

} // namespace

extern "C" void ZA_FACTS_FN(za_facts *out)
{
#define ZA_TYPE(T)                                     \
    za_add(out, "sizeof(" #T ")", "%zu", sizeof(T));   \
    za_add(out, "alignof(" #T ")", "%zu", alignof(T)); \
    za_add(out, "type(" #T ")", "%s", typeid(T).name());
#define ZA_ENUM(T) \
    za_add(out, "underlying(" #T ")", "%s", typeid(std::underlying_type_t<T>).name());
#define ZA_MEMBER(T, m)                                                                \
    za_add(out, "offsetof(" #T ", " #m ")", "%zu", offsetof(T, m));                    \
    za_add(out, "sizeof(" #T "." #m ")", "%zu", sizeof(static_cast<T *>(nullptr)->m)); \
    za_add(out, "type(" #T "." #m ")", "%s", typeid(decltype(static_cast<T *>(nullptr)->m)).name());
#ifdef NCCL_CONFIG_INITIALIZER
    const ncclConfig_t za_config = NCCL_CONFIG_INITIALIZER;
#define ZA_CONFIG_INIT(m) za_value(out, "NCCL_CONFIG_INITIALIZER." #m, za_config.m);
#else
#define ZA_CONFIG_INIT(m) za_add(out, "NCCL_CONFIG_INITIALIZER." #m, "MISSING");
#endif
#ifdef NCCL_SIM_INFO_INITIALIZER
    const ncclSimInfo_t za_sim = NCCL_SIM_INFO_INITIALIZER;
#define ZA_SIM_INIT(m) za_value(out, "NCCL_SIM_INFO_INITIALIZER." #m, za_sim.m);
#else
#define ZA_SIM_INIT(m) za_add(out, "NCCL_SIM_INFO_INITIALIZER." #m, "MISSING");
#endif
#define ZA_EXPR(x)        \
    za_value(out, #x, x); \
    za_add(out, "type(" #x ")", "%s", typeid(x).name());
#define ZA_EXPR_MISSING(x) za_add(out, #x, "MISSING");
#include "facts.inc"

    /* gen/ref_macros.inc: every macro of the reference header, each under #ifdef. ZA_MACRO
     * stringifies its own argument: passing it on to ZA_EXPR would expand it first. */
#define ZA_MACRO(M)       \
    za_value(out, #M, M); \
    za_add(out, "type(" #M ")", "%s", typeid(M).name());
#define ZA_MACRO_DEFINED(M)   za_add(out, "defined(" #M ")", "yes");
#define ZA_MACRO_UNDEFINED(M) za_add(out, "defined(" #M ")", "no");
#include "ref_macros.inc"

#define ZA_FUNCTION(f) za_probe<f>(out, #f ".type", #f ".symbol");
#include "ref_functions.inc"

#define ZA_ENUMERATOR(e) za_enum_probe<e>(out, "type(" #e ")", #e);
#include "ref_enumerators.inc"
}

#endif /* ZINC_TESTS_ABI_FACTS_CXX_H */
