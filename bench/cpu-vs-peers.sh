#!/bin/bash
# Host-memory allreduce (float sum) on this machine: zinc against Open MPI and Gloo, in one
# sitting, as a markdown table with the ratios the README reports.
#   bench/cpu-vs-peers.sh [NRANKS=2] [PEERS_SCRIPT=../shared/bench/cpu/run-peers.sh]
# zinc is measured with zinc-perf (nccl-tests definitions: busbw = algbw * 2(n-1)/n) under
# zinc-run; the peers with the reference programs in ../shared/bench/cpu (the same definitions).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
n=${1:-2}
peers=${2:-$here/../shared/bench/cpu/run-peers.sh}
build=${BUILD:-$here/build}
[ -x "$build/bin/zinc-perf" ] || { echo "build zinc first (make)"; exit 2; }
[ -f "$peers" ] || { echo "peer script $peers not found"; exit 2; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# Small sizes need many iterations for a stable latency; large ones fewer.
"$build/bin/zinc-run" -n "$n" "$build/bin/zinc-perf" all_reduce -b 8 -e 32K -f 4 -n 2000 -w 100 -c 0 >"$out/zs"
"$build/bin/zinc-run" -n "$n" "$build/bin/zinc-perf" all_reduce -b 128K -e 8M -f 4 -n 100 -w 10 -c 0 >"$out/zl"
bash "$peers" "$n" 8388608 >"$out/peers" 2>/dev/null
cat "$out/zs" "$out/zl" | awk '$1 ~ /^[0-9]+$/ {print $1, $6, $8}' >"$out/zinc"
awk '/^# mpi_allreduce/ {p=1; next} /^# gloo/ {p=0} p && $1 ~ /^[0-9]+$/ {print $1, $2, $3}' "$out/peers" >"$out/mpi"
awk '/^# gloo/ {p=1; next} p && $1 ~ /^[0-9]+$/ {print $1, $2, $3}' "$out/peers" >"$out/gloo"

echo "allreduce float sum, $n ranks, $(nproc) cores, $(date -u +%Y-%m-%d)"
echo
echo "| bytes | zinc us | zinc busbw GB/s | Open MPI us | Open MPI busbw | Gloo us | Gloo busbw | zinc/MPI busbw | zinc/Gloo busbw | zinc/MPI time |"
echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
join "$out/zinc" "$out/mpi" | join - "$out/gloo" | awk '{
    r1 = $5 > 0 ? $3 / $5 : 0; r2 = $7 > 0 ? $3 / $7 : 0; t = $4 > 0 ? $2 / $4 : 0;
    printf "| %s | %.2f | %.3f | %.2f | %.3f | %.1f | %.3f | %.1fx | %.1fx | %.2f |\n", $1, $2, $3, $4, $5, $6, $7, r1, r2, t }'
