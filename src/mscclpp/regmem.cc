// mscclppRegisterBuffer and mscclppRegisteredBufferWrite: C++ because mscclppRegisteredMemory
// holds a std::vector (as in MSCCL++ 0.1); the work is done in regmem.c.
#include "mscclpp.h"

#include <cstring>

extern "C" {
// regmem.c (msc.h is C only: it includes headers with C11 atomics).
int zn_msc_register(mscclppComm_t c, void *mem, uint64_t size, void **remote);
int zn_msc_reg_write(mscclppComm_t c, void *remote, const void *src, uint64_t size,
                     uint64_t dst_off, void *stream);
int zn_msc_nconns(mscclppComm_t c);
int zn_msc_arg_error(const char *msg);
}

#define ZN_MSC_EXPORT __attribute__((visibility("default")))

extern "C" ZN_MSC_EXPORT mscclppResult_t mscclppRegisterBuffer(mscclppComm_t comm,
                                                               void *local_memory, size_t size,
                                                               mscclppRegisteredMemory *regMem)
{
    if (!comm || !local_memory || !regMem || size == 0)
        return (mscclppResult_t)zn_msc_arg_error(
            "mscclppRegisterBuffer: comm, local_memory and regMem must be set and size > 0");
    std::vector<void *> remote((size_t)zn_msc_nconns(comm) + 1, nullptr);
    int res = zn_msc_register(comm, local_memory, size, remote.data());
    if (res != 0) return (mscclppResult_t)res;
    regMem->p2p.clear();
    for (int i = 0; i < zn_msc_nconns(comm); i++)
        regMem->p2p.push_back(mscclppRegisteredMemoryP2P{ remote[(size_t)i], nullptr });
    return mscclppSuccess;
}

extern "C" ZN_MSC_EXPORT mscclppResult_t
mscclppRegisteredBufferWrite(mscclppComm_t comm, mscclppRegisteredMemory *regMem, void *srcBuff,
                             size_t size, uint32_t srcOffset, uint32_t dstOffset, int64_t stream)
{
    if (!comm || !regMem || !srcBuff)
        return (mscclppResult_t)zn_msc_arg_error(
            "mscclppRegisteredBufferWrite: comm, regMem and srcBuff must be set");
    for (const mscclppRegisteredMemoryP2P &p : regMem->p2p) {
        int res = zn_msc_reg_write(comm, p.remoteBuff, (const char *)srcBuff + srcOffset, size,
                                   dstOffset, (void *)(intptr_t)stream);
        if (res != 0) return (mscclppResult_t)res;
    }
    return mscclppSuccess;
}
