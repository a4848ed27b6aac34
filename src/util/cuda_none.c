/*
 * A build without CUDA: every function of util/cuda_api.h answers what its list entry says,
 * one definition per entry made from the list. The library is the same otherwise: callers ask
 * zn_cuda_available() (0 here) and make host communicators.
 */
#include "cuda.h"

#if !ZINC_HAVE_CUDA
#include "err.h"

#include <string.h>

static ncclResult_t absent(const char *what)
{
    return zn_error(ncclInvalidUsage, ZN_INIT, "%s: this zinc build has no CUDA support", what);
}

#define ZN_NOCUDA_ERR(what)  return absent(what);
#define ZN_NOCUDA_RET(value) return value;
#define ZN_NOCUDA_VOID
#define ZN_NOCUDA_DO(...) __VA_ARGS__;
#define ZN_CUDA_FN(ret, name, params, nocuda) \
    ret name params                           \
    {                                         \
        nocuda                                \
    }
#include "cuda_api.h"

#endif
