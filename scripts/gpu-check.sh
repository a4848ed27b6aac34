#!/bin/bash
# One pass on a GPU machine: build, environment facts, GPU correctness (both process models,
# graphs, the staged path), then zinc against NCCL. Logs go to $OUT (or ./gpu-out).
#   scripts/gpu-check.sh [quick|tests|bench|all]
set -uo pipefail
what=${1:-quick}
here=$(cd "$(dirname "$0")/.." && pwd)
final=${OUT:-$here/gpu-out}
out=$(mktemp -d)
mkdir -p "$final"
# The device tool returns at most 8 files: logs travel as one archive.
trap 'tar -C "$out" -czf "$final/logs.tgz" . 2>/dev/null; cp "$out/summary.txt" "$final/" 2>/dev/null; cp "$out/bench/busbw.png" "$final/" 2>/dev/null; cp "$out/bench.log" "$final/bench.md" 2>/dev/null' EXIT
export NCCL_NVLS_ENABLE=0 ZINC_TIMEOUT=${ZINC_TIMEOUT:-30}
cd "$here"
log() { echo "== $*" | tee -a "$out/summary.txt"; }
step() { # name timeout command...
    local name=$1 t=$2; shift 2
    local t0=$(date +%s%N)
    timeout "$t" "$@" >"$out/$name.log" 2>&1
    local rc=$? dt=$(( ($(date +%s%N) - t0) / 1000000 ))
    local wrong=$(grep -E "^# Out of bounds" "$out/$name.log" | head -1)
    printf '%-34s rc=%-4s %8s ms  %s\n' "$name" "$rc" "$dt" "$wrong" | tee -a "$out/summary.txt"
    [ $rc = 0 ] || tail -5 "$out/$name.log" | sed 's/^/    /' | tee -a "$out/summary.txt"
}
{ nvidia-smi -L; nvidia-smi topo -m; nvcc --version | tail -1; cmake --version | head -1; } >"$out/env.txt" 2>&1
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
log "GPUs: $ngpu"
step build 560 bash -c "cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null && cmake --build build -j \$(nproc)"
[ -x build/bin/zinc-perf ] || { log "build failed"; tail -30 "$out/build.log"; exit 1; }
P="build/bin/zinc-perf"
R="build/bin/zinc-run"
if [ "$what" = quick ] || [ "$what" = all ]; then
    step ar_threads 120 $P all_reduce -g "$ngpu" -b 8 -e 64M -f 8 -c 1 -n 3 -w 1
    step ar_procs 120 $R -n "$ngpu" $P all_reduce -b 8 -e 64M -f 8 -c 1 -n 3 -w 1
    for c in all_gather reduce_scatter broadcast reduce alltoall sendrecv gather scatter; do
        step "${c}_procs" 120 $R -n "$ngpu" $P $c -b 8 -e 16M -f 16 -c 1 -n 2 -w 1
    done
    step ar_types_threads 180 $P all_reduce -g "$ngpu" -b 8 -e 1M -f 32 -d all -o all -c 1 -n 1 -w 1
    step ar_graph_procs 120 $R -n "$ngpu" $P all_reduce -G 3 -b 8 -e 8M -f 8 -c 1 -n 3 -w 1
    step staged_procs 120 env ZINC_P2P_DISABLE=1 $R -n 2 $P all_reduce -b 8 -e 4M -f 8 -c 1 -n 2 -w 1
    step staged_threads 120 env ZINC_P2P_DISABLE=1 $P all_gather -g 2 -b 8 -e 4M -f 8 -c 1 -n 2 -w 1
fi
if [ "$what" = bench ] || [ "$what" = all ] || [ "$what" = quick ]; then
    step bench 400 env OUT_DIR="$out/bench" ITERS=${ITERS:-20} bash bench/gpu-vs-nccl.sh "$ngpu" "${MAXBYTES:-1G}"
fi
if [ "$what" = tests ] || [ "$what" = all ]; then
    step ctest_gpu "${CTEST_TIMEOUT:-560}" ctest --test-dir build -L gpu -R "${CTEST_FILTER:-.}" --output-on-failure
    grep -E "tests passed|Failed|Passed" "$out/ctest_gpu.log" | tail -60 >>"$out/summary.txt"
fi
cat "$out/summary.txt"
