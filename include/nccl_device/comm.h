/* nccl_device/comm.h -- the device communicator (defined in core.h). */
#ifndef ZINC_NCCL_DEVICE_COMM_H_
#define ZINC_NCCL_DEVICE_COMM_H_
#include "core.h"
#endif
