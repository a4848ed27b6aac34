/*
 * nccl_device.h -- NCCL 2.28's device API, as zinc implements it: device communicators,
 * teams, windows and symmetric pointers (core.h, ptr.h), cooperative groups (coop.h), LSA
 * barriers (lsa_barrier.h), GIN put/signal/wait and its barriers (gin.h, gin_barrier.h),
 * two-level barriers (barrier.h) and the LL all-to-all (ll_a2a.h).
 *
 * Host programs (C or C++) get the types and the host functions; CUDA code also gets the
 * device functions. Multicast (multimem) is not supported: zinc never uses NVLink multicast.
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
