// msc-perf: the benchmark of MSCCL++ connections (libmscclpp.so), shared between the host
// part (msc-perf.cc: options, timing, output) and the GPU kernels (msc-perf-gpu.cu).
#ifndef MSC_PERF_H
#define MSC_PERF_H

#include "mscclpp.h"

#include <cstddef>
#include <cstdint>

struct MscPerfGpu;
// GPU side (msc-perf-gpu.cu; in a build without CUDA these report that CUDA is missing).
// The rank's GPU (rank mod GPUs) made current, before mscclppCommInitRank binds the
// communicator to it; returns the device or < 0.
int mscPerfGpuSelect(int rank);
// Set up on the current device: buffer of bytes, connections to every peer (P2P).
MscPerfGpu *mscPerfGpuSetup(mscclppComm_t comm, int rank, int nranks, size_t bytes, int net);
// Run iters ping-pongs of bytes (rank 0 <-> 1) or iters allgathers of bytes per rank inside
// kernels; returns the GPU time in seconds, or < 0 on error. mode: 0 direct, 1 proxy.
double mscPerfGpuRun(MscPerfGpu *g, int pingpong, size_t bytes, int iters, int mode);
// Fill this rank's input for a check / count wrong elements after one run.
void mscPerfGpuFill(MscPerfGpu *g, int pingpong, size_t bytes);
long mscPerfGpuCheck(MscPerfGpu *g, int pingpong, size_t bytes, int iters);
void mscPerfGpuFree(MscPerfGpu *g);

// The byte pattern rank r writes at byte i.
static inline uint8_t mscPerfByte(int r, size_t i)
{
    return (uint8_t)(r * 73 + i * 13 + (i >> 8));
}

#endif
