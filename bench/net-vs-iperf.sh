#!/bin/bash
# One TCP connection on loopback: zinc's socket net (zinc-net-bench, 64 MB messages between two
# processes) against iperf3 (one stream, the same number of bytes), alternated in one sitting,
# as a markdown table. Each figure is the median of ROUNDS runs.
#   bench/net-vs-iperf.sh [ROUNDS=5] [extra zinc-net-bench args...]
# Environment: BUILD (default build/), IFACE (default lo), and any ZINC_ parameter, e.g.
# ZINC_SOCKET_NTHREADS=2 ZINC_NSOCKS_PERTHREAD=2 for helper threads and data streams.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$here/build}
rounds=${1:-5}
shift || true
"$here/scripts/deps.sh" bench >/dev/null
[ -x "$build/bin/zinc-net-bench" ] || { echo "build zinc first (make)"; exit 2; }
iface=${IFACE:-lo}
port=$((5200 + RANDOM % 500))
bytes=$((64 << 20))
iters=20
med() { sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
z=() i=()
for r in $(seq "$rounds"); do
    iperf3 -s -1 -p "$port" >/dev/null 2>&1 &
    srv=$!
    sleep 0.5
    i+=("$(iperf3 -c 127.0.0.1 -p "$port" -n $((bytes * iters)) -J |
        awk -F: '/"sum_received"/ {p=1} p && /"bits_per_second"/ {gsub(/[ ,]/, "", $2); printf "%.2f\n", $2 / 1e9; exit}')")
    wait "$srv" || true
    z+=("$(ZINC_SOCKET_IFNAME=$iface "$build/bin/zinc-net-bench" -b $bytes -n $iters "$@" |
        awk '{for (k = 1; k <= NF; k++) if ($(k+1) == "Gbit/s") print $k}')")
done
zm=$(printf '%s\n' "${z[@]}" | med)
im=$(printf '%s\n' "${i[@]}" | med)
echo "one connection on $iface, $((bytes >> 20)) MB messages x $iters, $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg), $(date -u +%Y-%m-%d)"
echo "zinc env: $(env | grep -E '^(ZINC|NCCL)_' | tr '\n' ' ')"
echo
echo "| | Gbit/s (median of $rounds) | runs |"
echo "| --- | ---: | --- |"
echo "| zinc socket net | $zm | ${z[*]} |"
echo "| iperf3 | $im | ${i[*]} |"
awk -v z="$zm" -v i="$im" 'BEGIN {printf "\nzinc / iperf3 = %.2f (target >= 0.85)\n", z / i}'
