/*
 * Checks shared by the multi-rank test programs on the public API. The program defines
 * `static int rank;` and `static long failures;` and includes nccl.h (zinc's, or NVIDIA's for
 * the compatibility test) before this header.
 *
 *   NCCLCHECK(call)      the call must succeed, else the rank exits 2 with the error text
 *   EXPECT(cond, fmt...) counts a failure with a message, and goes on
 */
#ifndef ZT_MP_CHECK_H
#define ZT_MP_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define NCCLCHECK(call)                                                                         \
    do {                                                                                        \
        ncclResult_t r_ = (call);                                                               \
        if (r_ != ncclSuccess) {                                                                \
            fprintf(stderr, "[%d] %s:%d %s failed: %s (%s)\n", rank, __FILE__, __LINE__, #call, \
                    ncclGetErrorString(r_), ncclGetLastError(NULL));                            \
            exit(2);                                                                            \
        }                                                                                       \
    } while (0)

#define EXPECT(cond, ...)                                                   \
    do {                                                                    \
        if (!(cond)) {                                                      \
            fprintf(stderr, "[%d] FAIL %s:%d: ", rank, __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                                   \
            fprintf(stderr, "\n");                                          \
            failures++;                                                     \
        }                                                                   \
    } while (0)

#endif
