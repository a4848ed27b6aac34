#!/bin/bash
# GPU communicators across hosts, one GPU: 2 ranks as two "hosts" (ZINC_HOSTID) sharing this
# machine's GPU, the socket net over loopback. Allreduce float sum, 8 B to MAXBYTES, in one
# sitting: the ring kernels with the proxy's GPU net engine carrying the hop between hosts
# (ZINC_GPU_NET=auto, the default) against the staged path (ZINC_GPU_NET=staged: device buffers
# through pinned host memory, the host collective over the net transport). Prints both tables
# and the ratio per size, for one process driving both ranks (their kernels run side by side)
# and for one process per rank (the GPU time-slices the two processes, which costs the kernel
# path milliseconds per step: not what a machine of one GPU per rank sees).
#   bench/gpu-net.sh [MAXBYTES=64M] [COLLECTIVE=all_reduce]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$here/build}
max=${1:-64M}
coll=${2:-all_reduce}
out=${OUT_DIR:-$(mktemp -d)}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 ZINC_NET=Socket NCCL_NET_PLUGIN=none RANKS_PER_HOST=1
perf=("$build/bin/zinc-perf" "$coll" -b 8 -e "$max" -f 4 -n "${ITERS:-20}" -w 3 -c 1)
for mode in auto staged; do
    # procs: one process per rank (hostwrap.sh sets ZINC_HOSTID); threads: one process, -g 2,
    # ZINC_HOSTID as a list (the ranks' kernels run side by side instead of time-slicing).
    ZINC_GPU_NET=$mode "$build/bin/zinc-run" -n 2 "$here/tests/hosts/hostwrap.sh" "${perf[@]}" \
        >"$out/procs_$mode.txt" 2>"$out/procs_$mode.err"
    ZINC_GPU_NET=$mode ZINC_HOSTID=h0,h1 "${perf[@]}" -g 2 \
        >"$out/threads_$mode.txt" 2>"$out/threads_$mode.err"
done
table() { awk '$1 ~ /^[0-9]+$/ && NF >= 12 {print $1, $6, $8, $9}' "$1"; }
echo "# $coll float sum, 2 hosts x 1 rank on one GPU, $(date -u +%Y-%m-%d), $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
for model in threads procs; do
    echo
    echo "## $model ($( [ $model = threads ] && echo "one process, -g 2, ZINC_HOSTID=h0,h1" || echo "one process per rank: the GPU time-slices them" ))"
    echo
    echo "| bytes | kernels+net us | busbw | wrong | staged us | busbw | wrong | time staged/kernels |"
    echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    join --nocheck-order <(table "$out/${model}_auto.txt") <(table "$out/${model}_staged.txt") |
        awk '{ printf "| %s | %s | %s | %s | %s | %s | %s | %.2f |\n", $1, $2, $3, $4, $5, $6, $7,
               ($2 > 0 ? $5 / $2 : 0) }'
done
