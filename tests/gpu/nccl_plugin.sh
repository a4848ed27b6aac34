#!/bin/bash
# Real NCCL (NVIDIA's libnccl.so.2 from PyTorch's wheel) loads zinc's net plugin
# (build/lib/libnccl-net-zinc.so, NCCL_NET_PLUGIN=zinc) and runs every collective across two
# "hosts" through it: 2 ranks, one process each, NCCL_HOSTID different per rank
# (tests/hosts/hostwrap.sh), so NCCL's only path between them is the net. Ranks share this
# machine's GPU (NCCL refuses two ranks on one GPU of one host, not of two hosts). zinc-perf
# runs on real NCCL (LD_LIBRARY_PATH) and checks every result (-c 1).
#   tests/gpu/nccl_plugin.sh BUILD_DIR [COLLECTIVES...]
# Fails unless NCCL says it loaded a plugin (named after the net it fronts, "Socket" here), zinc's
# plugin says it exports its socket net, zinc's socket net (NCCL's own logs no such line)
# accepted the connections, and NCCL's channels run via NET; skips (77) without NCCL's wheel.
set -uo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
build=$1
shift
colls=("$@")
[ ${#colls[@]} -gt 0 ] || colls=(all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv)
lib=${NCCL_LIB:-$(python3 -c 'import nvidia.nccl as m, os; print(os.path.join(list(m.__path__)[0], "lib"))' 2>/dev/null)}
if [ -z "$lib" ] || [ ! -f "$lib/libnccl.so.2" ]; then
    echo "SKIP: NVIDIA's NCCL not found (python3 -c 'import nvidia.nccl'; or set NCCL_LIB)"
    exit 77
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# Real NCCL first on the path (its libnccl.so.2), zinc's build/lib after it for the plugin.
export LD_LIBRARY_PATH="$lib:$build/lib" NCCL_NET_PLUGIN=zinc NCCL_NVLS_ENABLE=0 RANKS_PER_HOST=1 \
    NCCL_SOCKET_IFNAME=lo ZINC_SOCKET_IFNAME=lo NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET \
    ZINC_DEBUG=INFO ZINC_DEBUG_SUBSYS=NET
for c in "${colls[@]}"; do
    echo "== $c"
    "$build/bin/zinc-run" -n 2 --timeout 280 "$here/tests/hosts/hostwrap.sh" "$build/bin/zinc-perf" \
        "$c" -b 8 -e 4M -f 64 -d all -o all -r -1 -c 1 -n 1 -w 1 >"$log" 2>&1
    rc=$?
    grep -E '^ *[0-9]+ |^#' "$log" | tail -n 30 # zinc-perf's table (#wrong per row)
    [ $rc = 0 ] || { echo "zinc-perf $c on real NCCL failed ($rc):"; tail -n 40 "$log"; exit 1; }
    for want in "NCCL INFO .*NET/Plugin: Loaded net plugin Socket" "zinc net plugin: exporting net Socket" \
        "socket net .*: accepted a connection" "NCCL INFO .*via NET/Socket"; do
        grep -qE "$want" "$log" || { echo "expected a log line matching: $want"; grep -E "NET|zinc" "$log" | head -n 40; exit 1; }
    done
done
grep -E "NCCL INFO .*(NET/Plugin|Using network)|NCCL version" "$log" | sort -u | head -n 5
echo "real NCCL ran every collective through libnccl-net-zinc.so"
