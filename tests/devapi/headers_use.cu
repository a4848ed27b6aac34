/*
 * headers_use: a translation unit that uses every part of zinc's nccl_device.h, compiled by
 * the devapi_headers_* tests with nvcc (device functions: every template instantiated in a
 * kernel) and as C++ with the host compiler (the host parts). It is compiled, never run.
 */
#include <nccl_device.h>

/* Host parts: types, team arithmetic, the host API's declarations. */
int host_part(ncclComm_t comm, ncclDevComm const &dc)
{
    ncclTeam_t world = ncclTeamWorld(comm), lsa = ncclTeamLsa(dc), rail = ncclTeamRail(dc);
    ncclTeam_t inner = ncclTeamInnerFactor(world, 2), outer = ncclTeamOuterFactor(world, 2);
    ncclDevCommRequirements_t reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
    ncclDevResourceRequirements_t res = {};
    ncclLsaBarrierHandle_t lh;
    ncclGinBarrierHandle_t gh;
    ncclLLA2AHandle_t ah;
    reqs.resourceRequirementsList = &res;
    reqs.barrierCount = reqs.lsaBarrierCount = reqs.ginSignalCount = reqs.ginCounterCount = 1;
    reqs.worldGinBarrierCount = 1;
    reqs.ginConnectionType = NCCL_GIN_CONNECTION_FULL;
    ncclLsaBarrierCreateRequirement(lsa, 1, &lh, &res);
    ncclGinBarrierCreateRequirement(comm, rail, 1, &gh, &res);
    ncclLLA2ACreateRequirement(1, ncclLLA2ACalcSlots(8, 8), &ah, &res);
    ncclCommProperties_t props = NCCL_COMM_PROPERTIES_INITIALIZER;
    ncclCommQueryProperties(comm, &props);
    ncclDevComm_t out;
    ncclDevCommCreate(comm, &reqs, &out);
    ncclDevCommDestroy(comm, &out);
    void *p;
    ncclGetLsaDevicePointer(nullptr, 0, 0, &p);
    ncclGetPeerDevicePointer(nullptr, 0, 0, &p);
    ncclGetLsaMultimemDevicePointer(nullptr, 0, &p);
    ncclGetMultimemDevicePointer(nullptr, 0, dc.lsaMultimem, &p);
    ncclSymPtr<float> s(nullptr, 16);
    s += 2;
    s -= 1L;
    ncclSymPtr<char> c = s;
    ptrdiff_t d = (s + 3) - s;
    return ncclTeamRankIsMember(world, lsa, 0) + ncclTeamRankToTeam(world, lsa, 0) +
           ncclTeamRankToWorld(comm, world, 0) + ncclTeamRankToLsa(comm, world, 0) +
           ncclTeamRankToWorld(dc, inner, 0) + ncclTeamRankToLsa(dc, outer, 0) +
           ncclTeamRankInDifference(world, lsa, 0) + (int)ncclGetResourceBufferOffset(1) + (int)d +
           (int)c.offset + (s == s) + (s != s + 1);
}

#if __CUDACC__
template <typename Coop> __device__ void coop_part(Coop coop, int *out)
{
    out[0] = coop.thread_rank() + coop.size() + coop.num_threads();
    out[1] = (int)ncclCoopGetLaneMask(coop) + ncclCoopIsThread(coop) + ncclCoopWithinWarp(coop);
    out[2] = ncclCoopBcast(coop, out[0], 0);
    coop.sync();
    out[3] = ncclCoopCoalesced(coop).size() + ncclCoopCoalesced().size();
}

template <typename Coop>
__device__ void session_part(Coop coop, ncclDevComm const &comm, ncclWindow_t w, ncclLLA2AHandle ah,
                             float *out)
{
    {
        ncclLsaBarrierSession<Coop> bar(coop, comm, ncclTeamTagLsa(), 0);
        bar.arrive(coop, cuda::memory_order_release);
        bar.wait(coop, cuda::memory_order_acquire);
        bar.sync(coop, cuda::memory_order_acq_rel);
    }
    {
        ncclLsaBarrierSession<Coop> bar(coop, comm, ncclTeamLsa(comm), comm.lsaBarrier, 1, true);
        bar.sync(coop, cuda::memory_order_relaxed);
        ncclResult_t r = bar.sync(coop, cuda::memory_order_acq_rel, 1000);
        if (r == ncclTimeout) r = bar.wait(coop, cuda::memory_order_acquire, ~0ull);
        out[4] = r == ncclSuccess;
    }
    ncclGin gin(comm, 0);
    ncclTeam world = ncclTeamWorld(comm);
    gin.put(world, 0, w, 0, w, 64, 100);
    gin.put(world, 0, w, 0, w, 64, 100, ncclGin_SignalInc{ 0 }, ncclGin_CounterInc{ 0 }, coop);
    gin.put(world, 0, ncclSymPtr<float>(w, 0), ncclSymPtr<float>(w, 64), 4,
            ncclGin_SignalAdd{ 1, 2 }, ncclGin_None{}, coop);
    gin.putValue(world, 0, w, 8, 7, ncclGin_SignalInc{ 0 }, coop);
    gin.putValue(world, 0, ncclSymPtr<double>(w, 8), 1.0);
    gin.signal(world, 0, ncclGin_SignalAdd{ 0, 3 }, coop);
    /* NCCL 2.30's strong / weak actions and hints. */
    gin.put(world, 0, w, 0, w, 64, 100, ncclGin_StrongSignalInc{ 0 }, ncclGin_WeakCounterInc{ 0 },
            coop, ncclGin_None{}, cuda::thread_scope_thread, cuda::thread_scope_device,
            ncclGinOptFlagsMaySkipCreditCheck, ncclGin_SegmentMixed{});
    gin.put(world, 0, ncclSymPtr<float>(w, 0), ncclSymPtr<float>(w, 64), 4,
            ncclGin_WeakSignalAdd{ 1, 2 }, ncclGin_None{}, coop, ncclGin_None{},
            cuda::thread_scope_thread, cuda::thread_scope_device, ncclGinOptFlagsDefault,
            ncclGin_SegmentHostNuma{});
    gin.putValue(world, 0, w, 8, 7, ncclGin_StrongSignalAdd{ 0, 4 }, coop);
    gin.signal(world, 0, ncclGin_WeakSignalInc{ 0 }, coop);
    ncclGinRequest_t req;
    gin.flushAsync(world, 0, &req, coop, ncclGinOptFlagsAggregateRequests);
    gin.wait(req, coop);
    ncclGin gin_cta(comm, 1, NCCL_GIN_RESOURCE_SHARING_CTA);
    gin_cta.flush(coop, cuda::memory_order_acquire, ncclGin_None{});
    gin.flush(coop);
    /* The C-callable functions, with the coop behind ncclCoopAny. */
    ncclGin_C gc(comm, NCCL_GIN_BACKEND_MASK_ALL, 0);
    ncclGin_C_init(&gc, NCCL_GIN_BACKEND_MASK_ALL, comm, 0);
    ncclGin_C_initWithResourceSharingMode(&gc, NCCL_GIN_BACKEND_MASK_ALL, comm, 0,
                                          NCCL_GIN_RESOURCE_SHARING_THREAD);
    ncclCoopAny any(coop);
    ncclGinPut(&gc, world, 0, w, 0, w, 64, 100, true, 0, ncclGinSignalAdd, 3, true, 0, any, false,
               nullptr, cuda::thread_scope_thread, cuda::thread_scope_device);
    ncclGinPut_v2(&gc, world, 0, w, 0, w, 64, 100, false, 0, ncclGinSignalInc, 0, false, 0, any,
                  false, nullptr, cuda::thread_scope_thread, cuda::thread_scope_device, 0);
    ncclGinPutValue(&gc, world, 0, w, 8, 5, 2, true, 0, ncclGinSignalInc, 0, any, false, nullptr,
                    cuda::thread_scope_thread, cuda::thread_scope_device);
    ncclGinPutValue_v2(&gc, world, 0, w, 8, 5, 8, false, 0, ncclGinSignalInc, 0, any, false,
                       nullptr, cuda::thread_scope_thread, cuda::thread_scope_device, 0);
    ncclGinSignal(&gc, world, 0, true, 0, ncclGinSignalInc, 0, any, false, nullptr,
                  cuda::thread_scope_thread, cuda::thread_scope_device);
    ncclGinSignal_v2(&gc, world, 0, true, 0, ncclGinSignalAdd, 2, any, false, nullptr,
                     cuda::thread_scope_thread, cuda::thread_scope_device, 0);
    ncclGinFlush(&gc, any, cuda::memory_order_acquire);
    ncclGinWaitSignal(&gc, any, 0, ncclGinReadSignal(&gc, 0, 64, cuda::memory_order_acquire), 64,
                      cuda::memory_order_acquire);
    ncclGinWaitCounter(&gc, any, 0, ncclGinReadCounter(&gc, 0, 56, cuda::memory_order_acquire), 56,
                       cuda::memory_order_acquire);
    *ncclGinGetSignalShadowPtr(&gc, 0) += any.size() + any.num_threads() + any.thread_rank();
    ncclGinResetSignal(&gc, 0);
    ncclGinResetCounter(&gc, 0);
    uint64_t sig = gin.readSignal(0, 32), cnt = gin.readCounter(0);
    gin.waitSignal(coop, 0, sig);
    gin.waitCounter(coop, 0, cnt);
    gin.increaseSignalShadow(0, 1);
    gin.waitSignalMeetShadow(coop, 0);
    unsigned before, delta;
    gin.waitSignalFollowShadow(coop, 0, 1u, &before, &delta);
    *gin.getSignalShadowPtr(0) += before + delta;
    gin.resetSignal(0);
    gin.resetCounter(0);
    {
        ncclGinBarrierSession<Coop> gb(coop, gin, ncclTeamTagRail(), 0);
        gb.sync(coop, cuda::memory_order_acq_rel, ncclGinFenceLevel::Relaxed);
        gb.sync(coop, cuda::memory_order_acq_rel);
        ncclResult_t r = gb.sync(coop, cuda::memory_order_acquire, ncclGinFenceLevel::Put, 1000);
        out[5] = r == ncclTimeout;
    }
    {
        ncclGinBarrierSession<Coop> gb(coop, gin, ncclTeamTagWorld(), 0);
        gb.sync(coop, cuda::memory_order_acq_rel, ncclGinFenceLevel::Put | ncclGinFenceLevel::Get);
    }
    {
        ncclGinAllContexts all(comm);
        ncclGinBarrierSession<Coop> a(coop, all, ncclTeamTagWorld(), 0);
        a.sync(coop, cuda::memory_order_acq_rel, ncclGinFenceLevel::None);
        ncclGinBarrierSession<Coop> b(coop, all, ncclTeamTagRail(), 1);
        b.sync(coop, cuda::memory_order_acq_rel);
        ncclGinBarrierSession<Coop> c(coop, all, ncclTeamRail(comm), comm.railGinBarrier, 2);
        c.sync(coop, cuda::memory_order_acq_rel);
    }
    ncclGinBarrier(coop, gin, ncclTeamTagWorld(), 0);
    ncclGinBarrier(coop, gin, ncclTeamTagRail(), 0, cuda::memory_order_release);
    ncclGinBarrier(coop, gin, ncclTeamWorld(comm), comm.worldGinBarrier, 0);
    ncclGinBarrier(coop, ncclGinAllContexts(comm), ncclTeamTagWorld(), 0);
    ncclGinBarrier(coop, ncclGinAllContexts(comm), ncclTeamTagRail(), 0);
    ncclGinBarrier(coop, ncclGinAllContexts(comm), ncclTeamRail(comm), comm.railGinBarrier, 0);
    ncclBarrier(coop, ncclTeamTagWorld(), gin, 0);
    ncclBarrier(coop, ncclTeamTagRail(), gin, 0, cuda::memory_order_acq_rel,
                ncclGinFenceLevel::None);
    {
        ncclBarrierSession<Coop> b(coop, ncclTeamTagWorld(), gin, 0);
        b.sync(coop, cuda::memory_order_acq_rel, ncclGinFenceLevel::Relaxed);
        b.lsaBarrier().arrive(coop, cuda::memory_order_release);
        b.lsaBarrier().wait(coop, cuda::memory_order_acquire);
        b.ginBarrier().sync(coop, cuda::memory_order_relaxed, ncclGinFenceLevel::Relaxed);
    }
    {
        ncclBarrierSession<Coop> b(coop, ncclTeamTagLsa(), comm, 0);
        b.sync(coop, cuda::memory_order_acq_rel, ncclGinFenceLevel::Relaxed);
        out[6] =
            b.sync(coop, cuda::memory_order_acq_rel, ncclGinFenceLevel::Put, 5000) == ncclSuccess;
    }
    {
        ncclBarrierSession<Coop> b(coop, ncclTeamTagWorld(), gin, 0);
        b.sync(coop, cuda::memory_order_acq_rel);
        out[7] =
            b.sync(coop, cuda::memory_order_acq_rel, ncclGinFenceLevel::None, 5000) == ncclSuccess;
    }
    {
        ncclBarrierSession<Coop> b(coop, ncclTeamTagRail(), gin, 0);
        b.sync(coop, cuda::memory_order_acq_rel, ncclGinFenceLevel::Relaxed);
    }
    {
        ncclLLA2ASession<Coop> a(coop, comm, ncclTeamLsa(comm), ah, 0, 16);
        a.send(0, 1, 2.0f);
        a.bcast(2, make_double2(1, 2));
        float4 v[2];
        a.template recvUnrolled<1, 2>(0, 2, 1, v);
        out[0] =
            a.template recv<float>(1) + v[1].x +
            a.template recvReduce<2, float>(
                0, 3, 1, [](float x) { return 2 * x; }, [](float x, float y) { return x + y; });
        a.endEpoch(coop);
    }
}

__global__ void kernel(ncclDevComm comm, ncclWindow_t w, ncclLLA2AHandle ah, float *out, int *iout)
{
    coop_part(ncclCoopThread(), iout);
    coop_part(ncclCoopTile<8>(), iout);
    coop_part(ncclCoopWarp(), iout);
    coop_part(ncclCoopLanes(0xffu), iout);
    coop_part(ncclCoopWarpSpan(0, 2, 0), iout);
    coop_part(ncclCoopCta(), iout);
    session_part(ncclCoopCta(), comm, w, ah, out);
    session_part(ncclCoopWarp(), comm, w, ah, out);
    session_part(ncclCoopThread(), comm, w, ah, out);
    session_part(ncclCoopWarpSpan(0, 4, 1), comm, w, ah, out);
    ncclSymPtr<float> s(w, 0);
    float *a = s.localPtr(), *b = s.lsaPtr(1), *c = s.peerPtr(1),
          *d = s.peerPtr(ncclTeamLsa(comm), 1);
    float *e = s.multimemPtr(comm.lsaMultimem), *f = s.lsaMultimemPtr(comm);
    out[1] = *a + *b + *c + *d + (e == f);
    char *r = (char *)ncclGetResourceBufferLocalPointer(comm, 0);
    r += (char *)ncclGetResourceBufferLsaPointer(comm, 0, 0) - r;
    r += (char *)ncclGetResourceBufferPeerPointer(comm, 0, ncclTeamWorld(comm), 0) - r;
    r += (char *)ncclGetResourceBufferMultimemPointer(comm, 0, comm.lsaMultimem) - r;
    r += (char *)ncclGetResourceBufferLsaMultimemPointer(comm, 0) - r;
    ncclSymPtr<char> rb = ncclGetResourceBuffer(comm, 1);
    out[2] = *r + *rb.localPtr() + *(char *)ncclGetPeerPointer(w, 0, 1) +
             *(char *)ncclGetLsaMultimemPointer(w, 0, comm) +
             *(char *)ncclGetMultimemPointer(w, 0, comm.lsaMultimem);
    out[3] = ncclFindWindow(ncclCoopCta(), comm, a) == w;
    out[4] = ncclFindWindow(ncclCoopWarp(), comm, b) == w;
}
#endif
