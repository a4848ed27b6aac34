#!/bin/bash
# One pass on a GPU machine: build, environment facts, GPU correctness (both process models,
# graphs, the staged path), then zinc against NCCL. Logs go to the folder for logs, $OUT
# (or ./gpu-out).
#   scripts/gpu-check.sh [quick|tests|bench|torch|sweep|all]...   (several run in that order)
# sweep: large allreduce over ZINC_GPU_CHANNELS x ZINC_GPU_SLOT_SIZE against NCCL; with
# SWEEP_PICK=1 the best pair is exported for the steps that follow.
set -uo pipefail
what=" ${*:-quick} "
has() { [[ "$what" == *" $1 "* || "$what" == *" all "* ]]; }
here=$(cd "$(dirname "$0")/.." && pwd)
final=${OUT:-$here/gpu-out}
out=$(mktemp -d)
mkdir -p "$final"
# The folder for logs may take only a few files: the logs travel as one archive.
trap 'tar -C "$out" -czf "$final/logs.tgz" . 2>/dev/null; cp "$out/summary.txt" "$final/" 2>/dev/null; cp "$out/bench/busbw.png" "$final/" 2>/dev/null; cp "$out/bench.log" "$final/bench.md" 2>/dev/null' EXIT
trap 'exit 143' TERM INT
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
if has torch; then
    step torch_zinc 240 bash examples/torch-on-zinc.sh "$ngpu"
    grep -E "zinc|passed|failed|FAILED|Error|error" "$out/torch_zinc.log" | grep -v Warning | head -20 >>"$out/summary.txt"
    if ! grep -q "all checks passed" "$out/torch_zinc.log"; then
        step torch_nccl 200 bash examples/torch-on-zinc.sh "$ngpu" --nccl
        grep -E "passed|failed|FAILED" "$out/torch_nccl.log" | head -10 >>"$out/summary.txt"
    fi
fi
if has tests; then
    step ctest_gpu "${CTEST_TIMEOUT:-400}" ctest --test-dir build -L gpu -R "${CTEST_FILTER:-.}" --output-on-failure
    grep -E "tests passed|Failed|\*\*\*" "$out/ctest_gpu.log" | tail -30 >>"$out/summary.txt"
    # How many GPU tests ran and how many skipped, and why (tests/gpu/gpu_summary.sh).
    cat build/Testing/gpu-tests.txt >>"$out/summary.txt" 2>/dev/null ||
        echo "no GPU test summary (build/Testing/gpu-tests.txt)" >>"$out/summary.txt"
fi
if has sweep; then
    # Channel sizing of the two-shot allreduce (ZINC_GPU_CHUNK) in the process-per-GPU model,
    # against NCCL in the same sitting; then LL forced up to 1 MB. With SWEEP_PICK=1 the best
    # chunk (geometric mean of the time ratios) is exported for the steps that follow.
    mkdir -p "$out/sweep"
    nccl_lib=$(python3 -c 'import nvidia.nccl as m, os; print(os.path.join(list(m.__path__)[0], "lib"))')
    sw=(all_reduce -b 256K -e 64M -f 2 -n 50 -w 10 -c 0)
    LD_LIBRARY_PATH=$nccl_lib timeout 60 $R -n "$ngpu" $P "${sw[@]}" >"$out/sweep/nccl.txt" 2>&1
    for c in ${SWEEP_CHUNK:-4K 8K 16K 32K}; do
        ZINC_GPU_CHUNK=$c timeout 60 $R -n "$ngpu" $P "${sw[@]}" >"$out/sweep/z_$c.txt" 2>&1
    done
    ZINC_PROTO=LL timeout 60 $R -n "$ngpu" $P all_reduce -b 128K -e 1M -f 2 -n 50 -w 10 -c 1 \
        >"$out/sweep/ll_forced.txt" 2>&1
    python3 - "$out/sweep" <<'PY' | tee -a "$out/summary.txt"
import glob, math, os, sys
def us(f):
    d = {}
    for l in open(f):
        t = l.split()
        if len(t) >= 12 and t[0].isdigit(): d[int(t[0])] = float(t[5])
    return d
d = sys.argv[1]; ref = us(os.path.join(d, "nccl.txt")); best = None
print("NCCL us:", " ".join(f"{k}:{v:.1f}" for k, v in sorted(ref.items())))
for f in sorted(glob.glob(os.path.join(d, "z_*.txt"))):
    z = us(f); c = os.path.basename(f)[2:-4]
    r = [z[k] / ref[k] for k in sorted(ref) if k in z and ref[k] > 0]
    if not r: print(c, "failed"); continue
    g = math.exp(sum(map(math.log, r)) / len(r))
    print(f"chunk {c:>4}: time zinc/NCCL " + " ".join(f"{x:.2f}" for x in r) + f"  geomean {g:.3f}")
    if best is None or g < best[0]: best = (g, c)
ll = us(os.path.join(d, "ll_forced.txt"))
print("LL forced us:", " ".join(f"{k}:{v:.1f}" for k, v in sorted(ll.items())))
if best:
    print(f"best: ZINC_GPU_CHUNK={best[1]} (geomean {best[0]:.3f})")
    open(os.path.join(d, "best.env"), "w").write(f"export ZINC_GPU_CHUNK={best[1]}\n")
PY
    grep -h "Out of bounds" "$out/sweep/ll_forced.txt" | tee -a "$out/summary.txt"
    if [ "${SWEEP_PICK:-0}" = 1 ] && [ -f "$out/sweep/best.env" ]; then
        . "$out/sweep/best.env"
        step check_best 120 $R -n "$ngpu" $P all_reduce -b 8 -e 64M -f 4 -c 1 -n 2 -w 1
    fi
fi
if has quick; then
    # At least 2 ranks: on one GPU they share it, with few enough channels to run side by side.
    nr=$ngpu sh=()
    if [ "$ngpu" -lt 2 ]; then
        nr=2 sh=(env ZINC_GPU_CHANNELS="${ZINC_GPU_CHANNELS:-16}")
    fi
    step ar_threads 120 "${sh[@]}" $P all_reduce -g "$nr" -b 8 -e 64M -f 8 -c 1 -n 3 -w 1
    step ar_procs 120 "${sh[@]}" $R -n "$nr" $P all_reduce -b 8 -e 64M -f 8 -c 1 -n 3 -w 1
    for c in all_gather reduce_scatter broadcast reduce alltoall sendrecv gather scatter; do
        step "${c}_procs" 120 "${sh[@]}" $R -n "$nr" $P $c -b 8 -e 16M -f 16 -c 1 -n 2 -w 1
    done
    step ar_types_threads 180 "${sh[@]}" $P all_reduce -g "$nr" -b 8 -e 1M -f 32 -d all -o all -c 1 -n 1 -w 1
    step ar_graph_procs 120 "${sh[@]}" $R -n "$nr" $P all_reduce -G 3 -b 8 -e 8M -f 8 -c 1 -n 3 -w 1
    step staged_procs 120 "${sh[@]}" env ZINC_P2P_DISABLE=1 $R -n 2 $P all_reduce -b 8 -e 4M -f 8 -c 1 -n 2 -w 1
    step staged_threads 120 "${sh[@]}" env ZINC_P2P_DISABLE=1 $P all_gather -g 2 -b 8 -e 4M -f 8 -c 1 -n 2 -w 1
fi
if has bench || has quick; then
    step bench 400 env OUT_DIR="$out/bench" ITERS=${ITERS:-20} bash bench/gpu-vs-nccl.sh "$ngpu" "${MAXBYTES:-1G}"
fi
cat "$out/summary.txt"
