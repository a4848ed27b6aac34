/*
 * gpu_memfree_check: ncclMemAlloc on every visible GPU, then ncclMemFree of all of them with
 * one other device current, as nccl-tests does in its one-process mode (-g N) when it frees
 * every GPU's buffers from the last device it set. NCCL accepts that; so must zinc. Also: a
 * pointer inside an allocation, and one from cudaMalloc, are refused with
 * ncclInvalidArgument, and the current device is the same after every call. With two GPUs:
 * each GPU's buffer can be copied on its own stream while another GPU is current.
 * Meaningful with two GPUs or more; with one it checks the single-device case.
 */
#include "nccl.h"

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

static int failures;

static void expect(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "FAIL: %s\n", what);
        failures++;
    }
}

int main(void)
{
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
        printf("SKIP: no GPU\n");
        return 77;
    }
    if (ndev > 8) ndev = 8;
    void *buf[8];
    for (int d = 0; d < ndev; d++) {
        cudaSetDevice(d);
        ncclResult_t r = ncclMemAlloc(&buf[d], (size_t)(d + 1) << 20);
        expect(r == ncclSuccess && buf[d], "ncclMemAlloc on each device");
        if (r != ncclSuccess) return 1;
        expect(cudaMemset(buf[d], d + 1, 4096) == cudaSuccess, "the memory is usable");
    }
    /* Usable with another GPU current, as nccl-tests -g N uses it (hypercube copies a rank's
     * block within its buffer on that rank's stream with whatever device is current): NCCL's
     * ncclMemAlloc grants access to every GPU that reaches the owner peer to peer. */
    for (int d = 0; ndev > 1 && d < ndev; d++) {
        int other = (d + 1) % ndev, reach = 0;
        if (cudaDeviceCanAccessPeer(&reach, other, d) != cudaSuccess || !reach) continue;
        cudaStream_t s;
        cudaSetDevice(d);
        if (cudaStreamCreate(&s) != cudaSuccess) return 1;
        cudaSetDevice(other);
        cudaError_t e =
            cudaMemcpyAsync((char *)buf[d] + 8192, buf[d], 4096, cudaMemcpyDeviceToDevice, s);
        if (e != cudaSuccess) fprintf(stderr, "  cudaMemcpyAsync: %s\n", cudaGetErrorString(e));
        expect(e == cudaSuccess, "a copy on the owner's stream with another GPU current");
        expect(cudaStreamSynchronize(s) == cudaSuccess, "the copy completes");
        unsigned char h[4096];
        expect(cudaMemcpy(h, (char *)buf[d] + 8192, sizeof(h), cudaMemcpyDeviceToHost) ==
                   cudaSuccess,
               "the copy reads back");
        int same = 1;
        for (size_t i = 0; i < sizeof(h); i++) same &= h[i] == (unsigned char)(d + 1);
        expect(same, "the copy carries the bytes");
        cudaSetDevice(d);
        cudaStreamDestroy(s);
    }
    /* The last device is current: free from it, the way nccl-tests -g N does. */
    int last = ndev - 1, cur = -1;
    cudaSetDevice(last);
    expect(ncclMemFree((char *)buf[0] + 4096) == ncclInvalidArgument,
           "a pointer inside an allocation is refused");
    void *plain = NULL;
    cudaMalloc(&plain, 4096);
    expect(ncclMemFree(plain) == ncclInvalidArgument, "cudaMalloc memory is refused");
    cudaFree(plain);
    for (int d = 0; d < ndev; d++) {
        char what[96];
        snprintf(what, sizeof(what), "ncclMemFree of device %d's buffer with device %d current", d,
                 last);
        ncclResult_t r = ncclMemFree(buf[d]);
        if (r != ncclSuccess) fprintf(stderr, "  %s\n", ncclGetLastError(NULL));
        expect(r == ncclSuccess, what);
        cudaGetDevice(&cur);
        expect(cur == last, "the current device is unchanged");
    }
    /* Once more in the other order, with device 0 current. */
    for (int d = 0; d < ndev; d++) {
        cudaSetDevice(d);
        expect(ncclMemAlloc(&buf[d], 1 << 20) == ncclSuccess, "ncclMemAlloc again");
    }
    cudaSetDevice(0);
    for (int d = ndev - 1; d >= 0; d--) expect(ncclMemFree(buf[d]) == ncclSuccess, "free again");
    cudaGetDevice(&cur);
    expect(cur == 0, "the current device is unchanged");
    printf("gpu_memfree_check: %d devices, %s\n", ndev, failures ? "FAILED" : "passed");
    return failures ? 1 : 0;
}
