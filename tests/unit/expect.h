/*
 * EXPECT(cond, ...): a result a multi-rank test program checks. When cond does not hold it
 * prints "[rank] FAIL file:line: message" to EXPECT_STREAM (stderr unless the includer defines
 * it first) and counts a failure. The includer declares `rank` and `failures`.
 */
#ifndef ZN_TESTS_EXPECT_H
#define ZN_TESTS_EXPECT_H

#include <stdio.h>

#ifndef EXPECT_STREAM
#define EXPECT_STREAM stderr
#endif

#define EXPECT(cond, ...)                                                          \
    do {                                                                           \
        if (!(cond)) {                                                             \
            fprintf(EXPECT_STREAM, "[%d] FAIL %s:%d: ", rank, __FILE__, __LINE__); \
            fprintf(EXPECT_STREAM, __VA_ARGS__);                                   \
            fprintf(EXPECT_STREAM, "\n");                                          \
            failures++;                                                            \
        }                                                                          \
    } while (0)

#endif
