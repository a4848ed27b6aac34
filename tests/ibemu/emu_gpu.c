/*
 * GPU memory in the emulation: the test double's GPUDirect RDMA. A real NIC reads and writes
 * GPU memory over PCIe once nvidia-peermem or a dmabuf lets it register that memory; here the
 * "NIC" is a thread of the owning process, so it copies to and from GPU memory with the CUDA
 * driver (cuMemcpyAsync on a non-blocking stream of its own, then waits for it: a copy on a
 * blocking stream would wait for the kernels that are waiting for this very data). The driver
 * is looked up only in a process that has already loaded it: a process without CUDA has no GPU
 * memory to register. Memory is GPU memory when the driver says its type is device memory.
 *
 * This models what the verbs API promises for GPU memory (registration, RDMA into and out of
 * it, a read that completes after earlier writes), not a NIC's PCIe behaviour: the copy has
 * landed in GPU memory when the NIC thread completes the request, so a flush is never needed
 * here, only issued.
 */
#include "emu.h"

#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

/* The driver's ABI values used here (cuda.h; stable since CUDA 4). */
enum {
    CU_PTR_ATTR_CONTEXT = 1,
    CU_PTR_ATTR_MEMORY_TYPE = 2,
    CU_MEMTYPE_DEVICE = 2,
    CU_STREAM_NONBLOCKING = 1
};

static struct {
    int (*ptr_attr)(void *data, int attribute, unsigned long long ptr);
    int (*ctx_set_current)(void *ctx);
    int (*stream_create)(void **stream, unsigned flags);
    int (*memcpy_async)(unsigned long long dst, unsigned long long src, size_t n, void *stream);
    int (*stream_sync)(void *stream);
    int ok;
} cu;
static pthread_once_t cu_once = PTHREAD_ONCE_INIT;

static void cu_load(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!h) return;
    *(void **)&cu.ptr_attr = dlsym(h, "cuPointerGetAttribute");
    *(void **)&cu.ctx_set_current = dlsym(h, "cuCtxSetCurrent");
    *(void **)&cu.stream_create = dlsym(h, "cuStreamCreate");
    *(void **)&cu.memcpy_async = dlsym(h, "cuMemcpyAsync");
    *(void **)&cu.stream_sync = dlsym(h, "cuStreamSynchronize");
    cu.ok =
        cu.ptr_attr && cu.ctx_set_current && cu.stream_create && cu.memcpy_async && cu.stream_sync;
}

void *emu_gpu_context(const void *p)
{
    pthread_once(&cu_once, cu_load);
    if (!cu.ok) return NULL;
    unsigned type = 0;
    void *ctx = NULL;
    if (cu.ptr_attr(&type, CU_PTR_ATTR_MEMORY_TYPE, (unsigned long long)(uintptr_t)p) != 0 ||
        type != CU_MEMTYPE_DEVICE)
        return NULL;
    if (cu.ptr_attr(&ctx, CU_PTR_ATTR_CONTEXT, (unsigned long long)(uintptr_t)p) != 0) return NULL;
    return ctx;
}

int emu_copy(void *dst, const void *src, size_t n, void *gpu_ctx)
{
    if (!gpu_ctx) {
        memcpy(dst, src, n);
        return 0;
    }
    /* One stream per NIC thread and context. */
    static _Thread_local void *cur, *stream;
    if (cur != gpu_ctx) {
        if (cu.ctx_set_current(gpu_ctx) != 0) goto err;
        cur = gpu_ctx;
        stream = NULL;
    }
    if (!stream && cu.stream_create(&stream, CU_STREAM_NONBLOCKING) != 0) goto err;
    if (cu.memcpy_async((unsigned long long)(uintptr_t)dst, (unsigned long long)(uintptr_t)src, n,
                        stream) != 0 ||
        cu.stream_sync(stream) != 0)
        goto err;
    return 0;
err:
    emu_log("GPU memory copy of %zu bytes from %p to %p failed", n, src, dst);
    return -1;
}
