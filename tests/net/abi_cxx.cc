// net_abi: src/net/nccl_net.h must also be usable from C++ (plugins are often C++).
#include "net/nccl_net.h"

static_assert(sizeof(ncclNetProperties_v11_t) == 112, "v11 properties as NCCL lays them out");

extern "C" int zn_net_abi_cxx_size(void)
{
    return (int)sizeof(ncclNet_v11_t);
}
