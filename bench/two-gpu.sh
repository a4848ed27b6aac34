#!/bin/bash
# zinc against real NCCL on two GPUs of one host: the same zinc-perf binary on both libraries,
# one sitting, NVLink multicast off. What the copy engine itself gives between the two GPUs
# (bench/peer_copy.cu) is measured first, as the link's ceiling.
#   bench/two-gpu.sh [MAXBYTES=1G]
# Sections (SECTIONS="link coll graph msc hosts", the default, or a part of it):
#   link   peer_copy: one 8-byte copy engine copy and its synchronize; GB/s one way and both
#   coll   every collective (COLLS), 8 B to MAXBYTES, one process per GPU (zinc-run, "procs")
#          and one process driving both (-g 2, "threads"): time per call, zinc / NCCL
#   graph  allreduce captured in a CUDA graph and replayed (-G), both models
#   msc    zinc's libmscclpp (msc-perf): put + signal -> wait ping-pong, direct (kernels store
#          over NVLink) and through the proxy (FIFO triggers, copy engine); allgather direct
#          and through the proxy beside NCCL's ncclAllGather
#   hosts  allreduce across two "hosts" (one GPU each, ZINC_HOSTID / NCCL_HOSTID per rank)
#          over each library's socket net on loopback
# Logs and the tables (tables.md) go to OUT_DIR (default: a new temporary folder).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$here/build}
max=${1:-1G}
out=${OUT_DIR:-$(mktemp -d)}
mkdir -p "$out"
nccl_lib=${NCCL_LIB:-$(python3 -c 'import nvidia.nccl as m, os; print(os.path.join(list(m.__path__)[0], "lib"))')}
[ -f "$nccl_lib/libnccl.so.2" ] || { echo "no libnccl.so.2 in $nccl_lib"; exit 2; }
export NCCL_NVLS_ENABLE=0
sections=" ${SECTIONS:-link coll graph msc hosts} "
want() { [[ $sections == *" $1 "* ]]; }
colls=${COLLS:-all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv gather scatter}
zp=$build/bin/zinc-perf
zr=("$build/bin/zinc-run" -n 2 --timeout 590)
small=(-b 8 -e 1M -f 4 -n "${ITERS_SMALL:-200}" -w 20 -c 0)
large=(-b 4M -e "$max" -f 4 -n "${ITERS:-20}" -w 3 -c 0)
wrap=() # what runs each rank's zinc-perf (procs)

go() { # NAME LIBDIR procs|threads ARGS...: zinc-perf ARGS at small then large sizes
    local name=$1 lib=$2 model=$3 p
    shift 3
    : >"$out/$name.txt"
    for p in small large; do
        local -n sz=$p
        if [ "$model" = threads ]; then
            LD_LIBRARY_PATH=$lib "$zp" "$@" "${sz[@]}" -g 2 >>"$out/$name.txt" 2>>"$out/$name.err" ||
                echo "$name failed ($?)" | tee -a "$out/failed"
        else
            LD_LIBRARY_PATH=$lib "${zr[@]}" "${wrap[@]}" "$zp" "$@" "${sz[@]}" >>"$out/$name.txt" 2>>"$out/$name.err" ||
                echo "$name failed ($?)" | tee -a "$out/failed"
        fi
    done
}
# "bytes time" of the out-of-place column of a zinc-perf or msc-perf log.
col() { awk '$1 ~ /^[0-9]+$/ && NF >= 9 {print $1, $6}' "$out/$1.txt" | sort -k1,1; }
# TITLE A B: time of A and B per size and A / B (below 1: A is faster).
table() {
    printf '\n### %s\n\n| bytes | %s us | %s us | %s / %s |\n| ---: | ---: | ---: | ---: |\n' \
        "$1" "$2" "$3" "$2" "$3"
    join <(col "$2") <(col "$3") | sort -n |
        awk '{ printf "| %s | %s | %s | %s |\n", $1, $2, $3, ($3 > 0 ? sprintf("%.2f", $2 / $3) : "-") }'
}

{
    echo "# zinc vs NCCL on 2 GPUs, $(date -u +%Y-%m-%d)"
    echo
    echo "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1) x2;" \
        "NCCL $(basename "$(readlink -f "$nccl_lib/libnccl.so.2")") from $nccl_lib;" \
        "time per call in us (nccl-tests' out-of-place column), below 1: zinc is faster"
} >"$out/tables.md"

if want link; then
    [ -x "$build/bin/peer_copy" ] || nvcc -O2 -o "$build/bin/peer_copy" "$here/bench/peer_copy.cu"
    { echo; echo "### the link: copy engine between the two GPUs (peer_copy)"; echo; echo '```'
      "$build/bin/peer_copy" "$(numfmt --from=iec "$max")"; echo '```'; } >>"$out/tables.md"
fi
if want coll; then
    for c in $colls; do
        for model in procs threads; do
            go "${c}_${model}_zinc" "$build/lib" "$model" "$c"
            go "${c}_${model}_nccl" "$nccl_lib" "$model" "$c"
            table "$c, $model" "${c}_${model}_zinc" "${c}_${model}_nccl" >>"$out/tables.md"
        done
    done
fi
if want graph; then
    for model in procs threads; do
        go "graph_${model}_zinc" "$build/lib" "$model" all_reduce -G 20
        go "graph_${model}_nccl" "$nccl_lib" "$model" all_reduce -G 20
        table "all_reduce in a CUDA graph, $model" "graph_${model}_zinc" "graph_${model}_nccl" >>"$out/tables.md"
    done
fi
if want msc; then
    m() { "${zr[@]}" "$build/bin/msc-perf" "$@" >"$out/$name.txt" 2>"$out/$name.err" ||
        echo "$name failed ($?)" | tee -a "$out/failed"; }
    for t in direct proxy; do
        name=pp_$t m -o pingpong -t "$t" -b 8 -e 4M -f 8 -n 200 -w 20
        name=ag_$t m -o allgather -t "$t" -b 64K -e "$max" -f 4 -n 20 -w 3
    done
    small=(-b 64K -e 1M -f 4 -n 200 -w 20 -c 0)
    go ag_nccl "$nccl_lib" procs all_gather
    table "put + signal -> wait, half round trip: direct vs through the proxy" pp_direct pp_proxy >>"$out/tables.md"
    table "allgather: libmscclpp direct vs NCCL" ag_direct ag_nccl >>"$out/tables.md"
    table "allgather: libmscclpp through the proxy vs NCCL" ag_proxy ag_nccl >>"$out/tables.md"
fi
if want hosts; then
    wrap=("$here/tests/hosts/hostwrap.sh")
    export RANKS_PER_HOST=1 ZINC_SOCKET_IFNAME=lo NCCL_SOCKET_IFNAME=lo
    small=(-b 8 -e 1M -f 4 -n 100 -w 10 -c 0)
    large=(-b 4M -e 128M -f 4 -n 10 -w 2 -c 0)
    ZINC_NET=Socket NCCL_NET_PLUGIN=none go hosts_zinc "$build/lib" procs all_reduce
    NCCL_NET=Socket NCCL_NET_PLUGIN=none go hosts_nccl "$nccl_lib" procs all_reduce
    table "all_reduce across two hosts over the socket net (loopback)" hosts_zinc hosts_nccl >>"$out/tables.md"
fi
cat "$out/tables.md"
echo
echo "logs: $out"
