#!/bin/bash
# Host-memory allreduce (float sum) on this machine: zinc against Open MPI and Gloo, in one
# sitting, as a markdown table with the ratios docs/benchmarks.md reports.
#   bench/cpu-vs-baselines.sh [NRANKS=2] [MAX_BYTES=8388608]
# zinc is measured with zinc-perf (nccl-tests definitions: busbw = algbw * 2(n-1)/n) under
# zinc-run; the baselines with the programs in bench/baselines (the same definitions; built here by
# bench/baselines/build.sh, which installs Open MPI and Gloo from Debian when run as root): Open MPI
# on shared memory, ranks bound to cores by mpirun, and Gloo's ring allreduce over TCP loopback.
# Sizes are 8 B x 4^k up to MAX_BYTES.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
n=${1:-2}
max=${2:-8388608}
build=${BUILD:-$here/build}
[ -x "$build/bin/zinc-perf" ] || { echo "build zinc first (make)"; exit 2; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$here/bench/baselines/build.sh" "$out" >/dev/null

# Small sizes need many iterations for a stable latency; large ones fewer.
small=$((max < 32768 ? max : 32768))
"$build/bin/zinc-run" -n "$n" "$build/bin/zinc-perf" all_reduce -b 8 -e "$small" -f 4 -n 2000 -w 100 -c 0 >"$out/zs"
: >"$out/zl"
if [ "$max" -ge 131072 ]; then
    "$build/bin/zinc-run" -n "$n" "$build/bin/zinc-perf" all_reduce -b 128K -e "$max" -f 4 -n 100 -w 10 -c 0 >"$out/zl"
fi
mpirun --allow-run-as-root --oversubscribe -np "$n" "$out/mpi_allreduce" "$max" >"$out/baselines"
rm -rf "$out/store" && mkdir -p "$out/store"
pids=()
for r in $(seq 0 $((n - 1))); do
    "$out/gloo_allreduce" "$r" "$n" "$out/store" "$max" >"$out/gloo.$r" &
    pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
cat "$out/gloo.0" >>"$out/baselines"
if awk '$1 ~ /^[0-9]+$/ && $4 != 1 {bad = 1} END {exit !bad}' "$out/baselines"; then
    echo "a peer program computed a wrong sum:"
    cat "$out/baselines"
    exit 1
fi
cat "$out/zs" "$out/zl" | awk '$1 ~ /^[0-9]+$/ {print $1, $6, $8}' >"$out/zinc"
awk '/^# mpi_allreduce/ {p=1; next} /^# gloo/ {p=0} p && $1 ~ /^[0-9]+$/ {print $1, $2, $3}' "$out/baselines" >"$out/mpi"
awk '/^# gloo/ {p=1; next} p && $1 ~ /^[0-9]+$/ {print $1, $2, $3}' "$out/baselines" >"$out/gloo"

echo "allreduce float sum, $n ranks, $(nproc) cores, $(date -u +%Y-%m-%d)"
echo
echo "| bytes | zinc us | zinc busbw GB/s | Open MPI us | Open MPI busbw | Gloo us | Gloo busbw | zinc/MPI busbw | zinc/Gloo busbw | zinc/MPI time |"
echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
join "$out/zinc" "$out/mpi" | join - "$out/gloo" | awk '{
    r1 = $5 > 0 ? $3 / $5 : 0; r2 = $7 > 0 ? $3 / $7 : 0; t = $4 > 0 ? $2 / $4 : 0;
    printf "| %s | %.2f | %.3f | %.2f | %.3f | %.1f | %.3f | %.1fx | %.1fx | %.2f |\n", $1, $2, $3, $4, $5, $6, $7, r1, r2, t }'
