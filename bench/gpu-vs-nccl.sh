#!/bin/bash
# zinc against real NCCL on this machine's GPUs, same zinc-perf binary, same sitting:
# allreduce float sum, 8 B to MAXBYTES, one process driving every GPU (-g N) and one process
# per GPU (zinc-run). Prints both tables, the ratio per size, and draws busbw vs size to
# $OUT_DIR/busbw.png.
#   bench/gpu-vs-nccl.sh [NGPUS=4] [MAXBYTES=8G] [COLLECTIVE=all_reduce]
# NCCL comes from PyTorch's wheel (python3 -c 'import nvidia.nccl'); NVLink multicast stays off.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$here/build}
n=${1:-4}
max=${2:-8G}
coll=${3:-all_reduce}
out=${OUT_DIR:-$(mktemp -d)}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0
nccl_lib=${NCCL_LIB:-$(python3 -c 'import nvidia.nccl as m, os; print(os.path.join(list(m.__path__)[0], "lib"))')}
[ -f "$nccl_lib/libnccl.so.2" ] || { echo "no libnccl.so.2 in $nccl_lib"; exit 2; }
# Small sizes take microseconds: many iterations (ITERS_SMALL) so that one hiccup of the host
# does not decide a ratio; large sizes take ITERS.
small=("$build/bin/zinc-perf" "$coll" -b 8 -e 1M -f 2 -n "${ITERS_SMALL:-500}" -w 50 -c 0)
large=("$build/bin/zinc-perf" "$coll" -b 2M -e "$max" -f 2 -n "${ITERS:-20}" -w 5 -c 0)

run() { # name libdir model
    local lib=$2 model=$3 p
    : >"$out/$1.txt"
    for p in small large; do
        local -n cmd=$p
        if [ "$model" = threads ]; then
            LD_LIBRARY_PATH=$lib "${cmd[@]}" -g "$n" >>"$out/$1.txt" 2>>"$out/$1.err"
        else
            LD_LIBRARY_PATH=$lib "$build/bin/zinc-run" -n "$n" "${cmd[@]}" >>"$out/$1.txt" 2>>"$out/$1.err"
        fi
    done
}
for model in threads procs; do
    run "zinc_$model" "$build/lib" "$model"
    run "nccl_$model" "$nccl_lib" "$model"
done

table() { awk '$1 ~ /^[0-9]+$/ && NF >= 12 {print $1, $6, $8}' "$1"; }
echo "# $coll float sum, $n GPUs, $(date -u +%Y-%m-%d), $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
for model in threads procs; do
    echo
    echo "## $model ($( [ $model = threads ] && echo "one process, -g $n" || echo "one process per GPU" ))"
    echo
    echo "| bytes | zinc us | zinc busbw | NCCL us | NCCL busbw | time zinc/NCCL | busbw zinc/NCCL |"
    echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    join --nocheck-order <(table "$out/zinc_$model.txt") <(table "$out/nccl_$model.txt") |
        awk '{ printf "| %s | %s | %s | %s | %s | %.2f | %.2f |\n", $1, $2, $3, $4, $5,
               ($4 > 0 ? $2 / $4 : 0), ($5 > 0 ? $3 / $5 : 0) }'
done
python3 "$here/bench/plot_busbw.py" "$out" "$coll" "$n" && echo && echo "plot: $out/busbw.png"
