/* The two one-thread kernels of the staged path (see dev_abi.h). */
#include "abi/dev_abi.h"
#include "fifo.cuh"

#include <cuda_runtime.h>

namespace zn
{

__global__ void signal_kernel(zn_dev_doorbell *bell, uint64_t *seq, uint64_t id)
{
    uint64_t k = *seq;
    bell->ring[k % ZN_DEV_RING] = id;
    __threadfence_system();
    bell->go = k + 1;
    __threadfence_system();
    *seq = k + 1;
}

__global__ void wait_kernel(zn_dev_doorbell *bell, const uint64_t *seq, zn_dev_comm comm)
{
    uint64_t target = *seq;
    uint64_t t0 = globaltimer();
    for (unsigned i = 1; bell->done < target; i++) {
        if ((i & 1023) == 0) {
            int code = 0;
            if (*comm.abort_flag)
                code = ZN_DEV_ABORTED;
            else if (globaltimer() - t0 > comm.timeout_ns)
                code = ZN_DEV_TIMEOUT;
            if (code) {
                if (*comm.error == 0) *(volatile uint32_t *)comm.error = (uint32_t)code;
                __threadfence_system();
                return;
            }
        }
    }
    __threadfence_system();
}

} // namespace zn

extern "C" int zn_dev_launch_signal(struct zn_dev_doorbell *bell, uint64_t *seq, uint64_t id,
                                    void *stream)
{
    zn::signal_kernel<<<1, 1, 0, (cudaStream_t)stream>>>(bell, seq, id);
    return (int)cudaGetLastError();
}

extern "C" int zn_dev_launch_wait(struct zn_dev_doorbell *bell, const uint64_t *seq,
                                  const struct zn_dev_comm *comm, void *stream)
{
    zn::wait_kernel<<<1, 1, 0, (cudaStream_t)stream>>>(bell, seq, *comm);
    return (int)cudaGetLastError();
}
