/*
 * nccl_device.h -- NCCL 2.30's device API, as zinc implements it: device communicators,
 * teams, windows and symmetric pointers (core.h, ptr.h), cooperative groups (coop.h), LSA
 * barriers (lsa_barrier.h), GIN put/signal/wait and its barriers (gin.h, gin_barrier.h),
 * two-level barriers (barrier.h) and the LL all-to-all (ll_a2a.h). Barrier waits can be given
 * a deadline and then return ncclTimeout.
 *
 * Host programs (C or C++) get the types and the host functions; CUDA code also gets the
 * device functions. The host functions also take the structs of programs built against NCCL
 * 2.28.9's header. Not provided: multicast (multimem: zinc never uses NVLink multicast), the
 * reduce / copy helpers of NCCL 2.30 (nccl_device/reduce_copy.h), GIN gets and signals at
 * window addresses (VA signals), and the C-callable GIN functions (ncclGin_C, ncclGinPut...).
 */
#ifndef ZINC_NCCL_DEVICE_H_
#define ZINC_NCCL_DEVICE_H_
#include "nccl_device/coop.h"
#include "nccl_device/core.h"
#include "nccl_device/comm.h"
#include "nccl_device/ptr.h"
#include "nccl_device/lsa_barrier.h"
#include "nccl_device/gin.h"
#include "nccl_device/gin_barrier.h"
#include "nccl_device/barrier.h"
#include "nccl_device/ll_a2a.h"
#endif
