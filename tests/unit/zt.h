/*
 * zt: the small assertion header zinc's unit tests use.
 *
 *   ZT_TEST(name) { ZT_ASSERT(cond); ZT_EQ_INT(a, b); ... }
 *   int main(void) { return zt_run(ZT_LIST(name1, name2)); }  -- or ZT_MAIN(name1, name2)
 *
 * A failed assertion prints file:line and the values, marks the test failed and returns from
 * it; main returns non-zero if any test failed, so ctest reports it.
 */
#ifndef ZT_H
#define ZT_H

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static int zt_failed_cur;

#define ZT_TEST(name) static void name(void)

#define ZT_FAIL(...)                                          \
    do {                                                      \
        fprintf(stderr, "%s:%d: FAIL: ", __FILE__, __LINE__); \
        fprintf(stderr, __VA_ARGS__);                         \
        fprintf(stderr, "\n");                                \
        zt_failed_cur = 1;                                    \
        return;                                               \
    } while (0)

#define ZT_ASSERT(cond)                    \
    do {                                   \
        if (!(cond)) ZT_FAIL("%s", #cond); \
    } while (0)

#define ZT_EQ_INT(a, b)                                                               \
    do {                                                                              \
        long long zt_a_ = (long long)(a), zt_b_ = (long long)(b);                     \
        if (zt_a_ != zt_b_) ZT_FAIL("%s == %s (%lld != %lld)", #a, #b, zt_a_, zt_b_); \
    } while (0)

#define ZT_EQ_STR(a, b)                                                              \
    do {                                                                             \
        const char *zt_a_ = (a), *zt_b_ = (b);                                       \
        if (!zt_a_ || !zt_b_ || strcmp(zt_a_, zt_b_) != 0)                           \
            ZT_FAIL("%s == %s (\"%s\" != \"%s\")", #a, #b, zt_a_ ? zt_a_ : "(null)", \
                    zt_b_ ? zt_b_ : "(null)");                                       \
    } while (0)

#define ZT_OK(call)                                              \
    do {                                                         \
        int zt_r_ = (int)(call);                                 \
        if (zt_r_ != 0) ZT_FAIL("%s returned %d", #call, zt_r_); \
    } while (0)

struct zt_case {
    const char *name;
    void (*fn)(void);
};

static inline int zt_run(const struct zt_case *cases, int n)
{
    int failed = 0;
    for (int i = 0; i < n; i++) {
        zt_failed_cur = 0;
        cases[i].fn();
        fprintf(stderr, "%-4s %s\n", zt_failed_cur ? "FAIL" : "ok", cases[i].name);
        failed += zt_failed_cur;
    }
    fprintf(stderr, "%d/%d passed\n", n - failed, n);
    return failed ? 1 : 0;
}

#define ZT_CASE(fn) \
    {               \
#fn, fn     \
    }
#define ZT_MAIN(...)                                                               \
    int main(void)                                                                 \
    {                                                                              \
        static const struct zt_case zt_cases_[] = { __VA_ARGS__ };                 \
        return zt_run(zt_cases_, (int)(sizeof(zt_cases_) / sizeof(zt_cases_[0]))); \
    }

#endif
