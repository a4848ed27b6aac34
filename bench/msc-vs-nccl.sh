#!/bin/bash
# One GPU, 2 ranks sharing it, one sitting: MSCCL++-style one-sided connections (zinc's
# libmscclpp, msc-perf) against ncclAllGather of zinc and of real NCCL, and GPU allreduce across
# two "hosts" of zinc against real NCCL.
#   bench/msc-vs-nccl.sh [MAXBYTES=64M]
# Tables (time in us, nccl-tests' size = bytes every rank ends with):
#  1. allgather, one host: msc-perf -t direct (kernels store into the peer's buffer over the
#     P2P mapping, signal, wait), -t proxy (kernels push FIFO triggers, the proxy's copy engine
#     moves the data), zinc's ncclAllGather. Real NCCL cannot run here: it refuses two ranks on
#     one GPU of one host.
#  2. allgather, two "hosts" (ZINC_HOSTID / NCCL_HOSTID differ, tests/hosts/hostwrap.sh), the
#     socket net over loopback: msc-perf -t gpunet (proxy kernels over mscclppTransportIB on the
#     socket net), zinc's ncclAllGather, real NCCL on its own socket net, and real NCCL on zinc's
#     net plugin (NCCL_NET_PLUGIN=zinc).
#  3. allreduce float sum across the two "hosts": zinc (ring kernels, the proxy's GPU net
#     engine), real NCCL (its socket net), real NCCL on zinc's plugin.
#  4. the put + signal -> wait ping-pong of msc-perf (half the round trip), direct / proxy /
#     gpunet.
#  5. alltoall and sendrecv across the two "hosts": zinc's kernels with the proxy carrying
#     every FIFO between hosts (ZINC_GPU_NET=auto), zinc staged through host memory
#     (ZINC_GPU_NET=ring), real NCCL on its socket net.
# SECTIONS picks some of them (default "1 2 3 4 5"): SECTIONS="5" bench/msc-vs-nccl.sh 16M.
# Every process owns a CUDA context on the one GPU, and the GPU time-slices contexts: a step
# that waits for the other process waits for a context switch. Both libraries pay this alike;
# it is not what a machine with a GPU per rank sees. NVLink multicast stays off.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$here/build}
max=${1:-64M}
out=${OUT_DIR:-$(mktemp -d)}
mkdir -p "$out"
nccl_lib=${NCCL_LIB:-$(python3 -c 'import nvidia.nccl as m, os; print(os.path.join(list(m.__path__)[0], "lib"))')}
[ -f "$nccl_lib/libnccl.so.2" ] || { echo "no libnccl.so.2 in $nccl_lib"; exit 2; }
export NCCL_NVLS_ENABLE=0 ZINC_SOCKET_IFNAME=lo NCCL_SOCKET_IFNAME=lo RANKS_PER_HOST=1
iters=${ITERS:-10}
run=("$build/bin/zinc-run" -n 2 --timeout 590)
hw="$here/tests/hosts/hostwrap.sh"
sz=(-b 8K -e "$max" -f 4 -n "$iters" -w 2 -c 1)

m() { "${run[@]}" "$build/bin/msc-perf" "$@" "${sz[@]}"; }                     # msc-perf
z() { LD_LIBRARY_PATH="$build/lib" "${run[@]}" "$@" "${sz[@]}"; }               # zinc
n() { LD_LIBRARY_PATH="$nccl_lib:$build/lib" "${run[@]}" "$@" "${sz[@]}"; }     # real NCCL
go() { # NAME ENV... -- COMMAND...: one run into $out/NAME.txt; a failure is noted, not fatal
    local name=$1 e=()
    shift
    while [ "$1" != -- ]; do e+=("$1"); shift; done
    shift
    (for kv in "${e[@]}"; do export "${kv?}"; done; "$@") >"$out/$name.txt" 2>"$out/$name.err" || echo "$name failed ($?): $out/$name.err" | tee -a "$out/failed"
}
zp=$build/bin/zinc-perf
snet=(ZINC_NET=Socket NCCL_NET_PLUGIN=none)
nnet=(NCCL_NET=Socket NCCL_NET_PLUGIN=none)
zplug=(NCCL_NET_PLUGIN=zinc ZINC_NET=Socket)

sections=" ${SECTIONS:-1 2 3 4 5} "
want() { [[ $sections == *" $1 "* ]]; }

if want 1; then
    go ag1_msc_direct -- m -o allgather -t direct
    go ag1_msc_proxy -- m -o allgather -t proxy
    go ag1_zinc -- z "$zp" all_gather
fi
if want 2; then
    go ag2_msc_gpunet ZINC_NET=Socket -- m -o allgather -t gpunet -H 2
    go ag2_zinc "${snet[@]}" -- z "$hw" "$zp" all_gather
    go ag2_nccl "${nnet[@]}" -- n "$hw" "$zp" all_gather
    go ag2_nccl_zplug "${zplug[@]}" -- n "$hw" "$zp" all_gather
fi
if want 3; then
    go ar2_zinc "${snet[@]}" -- z "$hw" "$zp" all_reduce
    go ar2_nccl "${nnet[@]}" -- n "$hw" "$zp" all_reduce
    go ar2_nccl_zplug "${zplug[@]}" -- n "$hw" "$zp" all_reduce
fi
if want 5; then
    for c in alltoall sendrecv; do
        go "${c}2_zinc" "${snet[@]}" -- z "$hw" "$zp" "$c"
        go "${c}2_zinc_staged" "${snet[@]}" ZINC_GPU_NET=ring -- z "$hw" "$zp" "$c"
        go "${c}2_nccl" "${nnet[@]}" -- n "$hw" "$zp" "$c"
    done
fi
sz=(-b 8 -e 4M -f 8 -n "$((iters * 5))" -w 5 -c 1)
if want 4; then
    go pp_direct -- m -o pingpong -t direct
    go pp_proxy -- m -o pingpong -t proxy
    go pp_gpunet ZINC_NET=Socket -- m -o pingpong -t gpunet -H 2
fi

# "bytes time wrong" of the out-of-place column; a run that failed gives an empty table.
col() { awk '$1 ~ /^[0-9]+$/ && NF >= 9 {print $1, $6, $9}' "$out/$1.txt" | sort -k1,1; }
table() { # title, then names of the runs; prints time (us) and #wrong per run, and ratios to the first
    local title=$1
    shift
    echo
    echo "### $title"
    echo
    local h="| bytes" s="| ---:" f
    for f in "$@"; do h="$h | $f us | wrong"; s="$s | ---: | ---:"; done
    for f in "${@:2}"; do h="$h | $f / $1"; s="$s | ---:"; done
    echo "$h |"
    echo "$s |"
    local j
    j=$(col "$1")
    for f in "${@:2}"; do j=$(join -a1 -e - -o auto <(echo "$j") <(col "$f")); done
    echo "$j" | sort -n | awk -v k=$# '{
        line = "| " $1
        for (i = 0; i < k; i++) line = line " | " $(2 + 2 * i) " | " $(3 + 2 * i)
        for (i = 1; i < k; i++) line = line sprintf(" | %s", ($(2 + 2 * i) > 0 && $2 > 0) ? sprintf("%.2f", $(2 + 2 * i) / $2) : "-")
        print line " |" }'
}
echo "# one-sided connections vs ncclAllGather, GPU allreduce across 2 hosts: 2 ranks on one GPU"
echo
echo "$(date -u +%Y-%m-%d), $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1), NCCL from $nccl_lib, $iters iterations per size"
want 1 && table "allgather, one host (P2P)" ag1_msc_direct ag1_msc_proxy ag1_zinc
want 2 && table "allgather, two hosts over the socket net on loopback" ag2_msc_gpunet ag2_zinc ag2_nccl ag2_nccl_zplug
want 3 && table "allreduce float sum, two hosts over the socket net on loopback" ar2_zinc ar2_nccl ar2_nccl_zplug
want 4 && table "put + signal -> wait ping-pong (half round trip)" pp_direct pp_proxy pp_gpunet
if want 5; then
    for c in alltoall sendrecv; do
        table "$c, two hosts over the socket net on loopback (zinc kernels, zinc staged, NCCL)" \
            "${c}2_zinc" "${c}2_zinc_staged" "${c}2_nccl"
    done
fi
echo
echo "logs: $out"
