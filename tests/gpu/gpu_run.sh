#!/bin/bash
# Run a GPU test, or skip it (exit 77) on a machine that cannot carry it, saying why.
# Usage: gpu_run.sh NAME RANKS GPUS WHY COMMAND ARGS...
#   RANKS  ranks the test runs (they share GPUs when the machine has fewer)
#   GPUS   distinct GPUs the test needs (1 for most; WHY says what needs more, "-" if nothing)
# Every verdict is appended to $ZINC_GPU_TEST_LOG (when set) as "NAME<TAB>ran|skip<TAB>why",
# for gpu_summary.sh.
set -euo pipefail
name=$1 ranks=$2 need=$3 why=$4
shift 4
record() { [ -z "${ZINC_GPU_TEST_LOG:-}" ] || printf '%s\t%s\t%s\n' "$name" "$1" "$2" >>"$ZINC_GPU_TEST_LOG"; }
skip() {
    echo "SKIP: $1"
    record skip "$1"
    exit 77
}

have=0
if command -v nvidia-smi >/dev/null 2>&1; then
    have=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
fi
# CUDA_VISIBLE_DEVICES narrows what the tests can use (nvidia-smi ignores it).
if [ -n "${CUDA_VISIBLE_DEVICES+x}" ]; then
    visible=$(tr ',' '\n' <<<"$CUDA_VISIBLE_DEVICES" | grep -c . || true)
    [ "$visible" -ge "$have" ] || have=$visible
fi
if [ "$have" -eq 0 ]; then
    [ -n "${visible+x}" ] && skip "no GPU visible (CUDA_VISIBLE_DEVICES=\"$CUDA_VISIBLE_DEVICES\")"
    skip "no GPU on this machine"
fi
[ "$have" -ge "$need" ] || skip "needs $need distinct GPUs ($why); this machine has $have"

export NCCL_NVLS_ENABLE=0
if [ "$ranks" -gt "$have" ]; then
    # Ranks share GPUs. In one process their kernels must run side by side: few enough channels
    # that all of them fit at once (a test that sets ZINC_GPU_CHANNELS itself keeps its value).
    # Across processes the GPU time-slices their contexts, so a kernel that waits for another
    # process's kernel is switched out and the other runs; under MPS they run side by side
    # again, which the channel limit covers too. A GPU in exclusive-process or prohibited
    # compute mode cannot take several processes: skip rather than fail on it.
    # (Read whole first: grep -q leaving early would fail the pipe under pipefail.)
    modes=$(nvidia-smi --query-gpu=compute_mode --format=csv,noheader 2>/dev/null || true)
    if [ -n "$modes" ] && grep -qv '^Default' <<<"$modes"; then
        skip "$ranks ranks on $have GPU(s) need to share one, and a GPU is not in Default compute mode"
    fi
    export ZINC_GPU_CHANNELS=${ZINC_GPU_CHANNELS:-16}
    # One process's streams share CUDA_DEVICE_MAX_CONNECTIONS hardware queues (default 8): with
    # more ranks than that, a staging gate kernel spinning in one queue would hold back the
    # signal kernel of a rank whose stream shares it.
    export CUDA_DEVICE_MAX_CONNECTIONS=${CUDA_DEVICE_MAX_CONNECTIONS:-32}
    echo "gpu_run: $ranks ranks on $have GPU(s): ranks share GPUs (ZINC_GPU_CHANNELS=$ZINC_GPU_CHANNELS)"
fi
record ran "$ranks ranks on $have GPU(s)"
exec "$@"
