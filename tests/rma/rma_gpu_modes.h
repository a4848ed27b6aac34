/*
 * rma_gpu_check's GPU-only modes (included by rma_test.c with ZT_GPU):
 *   graph   a put + wait captured into a CUDA graph, replayed with new data each time, eager
 *           calls on the same signal in between: the counts stay in step, every byte checked
 *   timing  ranks 0 and 1: an 8-byte put + signal + wait round trip against an 8-byte
 *           ncclSend / ncclRecv round trip, and puts of 256 MB against a copy of the same bytes
 *           into the peer's buffer (cudaMemcpyAsync to its mapping: what cudaMemcpyPeer does);
 *           prints the numbers (the lead compares them on distinct GPUs)
 */

#include "nccl_device/core.h" /* ncclGetPeerDevicePointer */

static void test_graph(struct world *w)
{
    int dst = (rank + 1) % nranks, from = (rank - 1 + nranks) % nranks;
    const size_t bytes = 8192 + 3, off = 64;
    uint8_t *h = malloc(bytes);
    signal_barrier(w->comm, 0); /* the setup is not captured */
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CUDACHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    NCCLCHECK(ncclPutSignal(w->src, bytes, ncclUint8, dst, w->win, off, 2, 0, 0, w->comm, stream));
    wait1(w->comm, from, 2, 0, 1);
    CUDACHECK(cudaStreamEndCapture(stream, &g));
    CUDACHECK(cudaGraphInstantiate(&ge, g, 0));
    for (int rep = 0; rep < 6; rep++) {
        make(h, rank, dst, 80 + rep, bytes);
        buf_write(w->src, h, bytes);
        buf_fill(w->wbuf, 0xEE, 16384);
        barrier(w->comm);
        CUDACHECK(cudaGraphLaunch(ge, stream));
        step_done();
        check_bytes(w->wbuf, off, bytes, from, 80 + rep, "graph replay");
        check_byte(w->wbuf, off + bytes, 0xEE, "graph replay");
        barrier(w->comm);
        if (rep % 2) continue;
        /* The same signal eagerly: replays and eager calls share the counts. */
        make(h, rank, dst, 90 + rep, bytes);
        buf_write(w->src, h, bytes);
        barrier(w->comm);
        NCCLCHECK(
            ncclPutSignal(w->src, bytes, ncclUint8, dst, w->win, off, 2, 0, 0, w->comm, stream));
        wait1(w->comm, from, 2, 0, 1);
        step_done();
        check_bytes(w->wbuf, off, bytes, from, 90 + rep, "eager between replays");
        barrier(w->comm);
    }
    CUDACHECK(cudaGraphExecDestroy(ge));
    CUDACHECK(cudaGraphDestroy(g));
    free(h);
}

static double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Microseconds per round trip of rounds put + signal + wait (rma 1) or send + receive. */
static double pingpong(struct world *w, int rma, int rounds)
{
    int peer = rank ^ 1;
    ncclWaitSignalDesc_t d = { .opCnt = 1, .peer = peer, .sigIdx = 5, .ctx = 0 };
    barrier(w->comm);
    double t0 = seconds();
    for (int i = 0; i < rounds; i++) {
        if (rank == 1) {
            if (rma)
                NCCLCHECK(ncclWaitSignal(1, &d, w->comm, stream));
            else
                NCCLCHECK(ncclRecv(w->wbuf, 8, ncclUint8, peer, w->comm, stream));
        }
        if (rma)
            NCCLCHECK(
                ncclPutSignal(w->src, 8, ncclUint8, peer, w->win, 0, 5, 0, 0, w->comm, stream));
        else
            NCCLCHECK(ncclSend(w->src, 8, ncclUint8, peer, w->comm, stream));
        if (rank == 0) {
            if (rma)
                NCCLCHECK(ncclWaitSignal(1, &d, w->comm, stream));
            else
                NCCLCHECK(ncclRecv(w->wbuf, 8, ncclUint8, peer, w->comm, stream));
        }
    }
    step_done();
    return (seconds() - t0) * 1e6 / rounds;
}

static void test_timing(struct world *w)
{
    if (nranks < 2) return;
    const size_t big = (size_t)256 << 20;
    const int reps = 10;
    uint8_t *bwin = buf_alloc(big, 1), *bsrc = buf_alloc(big, 0);
    ncclWindow_t win;
    NCCLCHECK(ncclCommWindowRegister(w->comm, bwin, big, &win, NCCL_WIN_DEFAULT));
    double us[2] = { 0, 0 }, gbs[2] = { 0, 0 };
    if (rank < 2) {
        for (int k = 0; k < 2; k++) (void)pingpong(w, k, 100); /* warm up */
        us[1] = pingpong(w, 1, 2000);
        us[0] = pingpong(w, 0, 2000);
    } else {
        for (int k = 0; k < 4; k++) barrier(w->comm);
    }
    /* Rank 0 puts into rank 1's window; then copies the same bytes into it directly. */
    barrier(w->comm);
    if (rank == 0) {
        double t0 = seconds();
        for (int i = 0; i < reps; i++)
            NCCLCHECK(ncclPutSignal(bsrc, big, ncclUint8, 1, win, 0, 6, 0, 0, w->comm, stream));
        step_done();
        gbs[1] = (double)big * reps / (seconds() - t0) / 1e9;
        void *peer = NULL;
        NCCLCHECK(ncclGetPeerDevicePointer(win, 0, 1, &peer));
        if (peer) {
            t0 = seconds();
            for (int i = 0; i < reps; i++)
                CUDACHECK(cudaMemcpyAsync(peer, bsrc, big, cudaMemcpyDeviceToDevice, stream));
            step_done();
            gbs[0] = (double)big * reps / (seconds() - t0) / 1e9;
        }
    } else if (rank == 1) {
        wait1(w->comm, 0, 6, 0, reps);
        step_done();
    }
    barrier(w->comm);
    if (rank == 0)
        printf("rma timing: 8-byte round trip: put+signal+wait %.2f us, send/recv %.2f us "
               "(ratio %.2f); %zu MB puts %.1f GB/s, peer copy %.1f GB/s (ratio %.2f)\n",
               us[1], us[0], us[0] > 0 ? us[1] / us[0] : 0.0, big >> 20, gbs[1], gbs[0],
               gbs[0] > 0 ? gbs[1] / gbs[0] : 0.0);
    NCCLCHECK(ncclCommWindowDeregister(w->comm, win));
    buf_free(bwin, 1);
    buf_free(bsrc, 0);
}
