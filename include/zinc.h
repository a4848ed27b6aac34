/*
 * zinc.h -- zinc's own extensions to the NCCL API.
 *
 * Everything NCCL defines is in nccl.h; this header adds only what NCCL does not have.
 */
#ifndef ZINC_H_
#define ZINC_H_

#include "nccl.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ZINC_VERSION_MAJOR  0
#define ZINC_VERSION_MINOR  1
#define ZINC_VERSION_PATCH  0
#define ZINC_VERSION_STRING "0.1.0"
#define ZINC_VERSION_CODE \
    (ZINC_VERSION_MAJOR * 10000 + ZINC_VERSION_MINOR * 100 + ZINC_VERSION_PATCH)

/* zinc's own version ("0.1.0"); ncclGetVersion reports the NCCL API level instead. */
const char *zincGetVersionString(void);

/* Whether comm is a host communicator (buffers in host memory, NULL stream, calls complete
 * on return): 1, or 0 for a cuda communicator. */
ncclResult_t zincCommIsHost(const ncclComm_t comm, int *isHost);

#ifdef __cplusplus
}
#endif

#endif /* ZINC_H_ */
