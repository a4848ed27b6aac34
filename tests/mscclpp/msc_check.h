/*
 * The checks of the libmscclpp test programs (C and C++). The includer declares
 * `static int rank;` and `static long failures;` first.
 *   MSCCLPPCHECK(call)  a call that must succeed: prints where and why, exits 2
 *   EXPECT(cond, ...)   a result that must hold: prints the message, counts a failure
 */
#ifndef ZN_TESTS_MSC_CHECK_H
#define ZN_TESTS_MSC_CHECK_H

#include "mscclpp.h"

#include <stdio.h>
#include <stdlib.h>

#define MSCCLPPCHECK(call)                                                                 \
    do {                                                                                   \
        mscclppResult_t r_ = (mscclppResult_t)(call);                                      \
        if (r_ != mscclppSuccess) {                                                        \
            fprintf(stderr, "[%d] %s:%d %s failed: %s\n", rank, __FILE__, __LINE__, #call, \
                    mscclppGetErrorString(r_));                                            \
            exit(2);                                                                       \
        }                                                                                  \
    } while (0)

#include "../unit/expect.h"

#endif
