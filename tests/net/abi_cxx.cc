// net_abi: src/net/nccl_net.h must also be usable from C++ (plugins are often C++).
#include "net/nccl_net.h"

#include <cstddef>

static_assert(sizeof(ncclNetProperties_v11_t) == 112, "v11 properties as NCCL lays them out");
static_assert(sizeof(ncclNetProperties_v12_t) == 128, "v12 properties as NCCL lays them out");
static_assert(offsetof(ncclNetProperties_v12_t, maxP2pBytes) == 104, "after v12's larger vProps");
static_assert(offsetof(ncclNetProperties_v12_t, planeId) == 126, "v12's plane id");

extern "C" int zn_net_abi_cxx_size(void)
{
    return (int)sizeof(ncclNet_v12_t);
}
