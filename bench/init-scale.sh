#!/bin/bash
# Communicator init at scale on one host: wall time of zinc-run starting N ranks of zinc-perf,
# each doing init + one 8-byte allreduce + destroy, and what init cost each rank (from the
# INFO line "init phases", zn_comm_setup): the slowest rank's phases and the bootstrap messages
# and bytes each rank sent and received (the largest over the ranks).
#   bench/init-scale.sh [N...]        (default: 64 128 256 512)
# Checks the limits that apply first: a rank holds about 2 log2(N) + 10 descriptors of the
# bootstrap and one shared-memory arena of ZINC_SHM_SLOT_SIZE (1 MB) x N bytes is made in
# /dev/shm.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$here/build}
[ -x "$build/bin/zinc-perf" ] || { echo "build zinc first (make)"; exit 2; }
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(64 128 256 512)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

shm_free=$(df -B1 --output=avail /dev/shm | tail -1)
echo "init + one allreduce, host communicators, $(nproc) cores, $(date -u +%Y-%m-%d)," \
     "/dev/shm free $((shm_free >> 20)) MB, ulimit -n $(ulimit -n)"
echo
echo "| ranks | wall s | slowest rank: join / peers / conns / arena / watch / barrier ms | init CPU ms per rank (max) | msgs sent / recv per rank (max) | bytes sent / recv per rank (max) |"
echo "| ---: | ---: | --- | ---: | ---: | ---: |"
for n in "${sizes[@]}"; do
    slot=$((1 << 20))
    if [ $((slot * n)) -ge "$shm_free" ]; then
        echo "| $n | skipped: the arena needs $((slot * n >> 20)) MB of /dev/shm | | | | |"
        continue
    fi
    start=$(date +%s.%N)
    ZINC_DEBUG=INFO ZINC_DEBUG_SUBSYS=INIT "$build/bin/zinc-run" -n "$n" --timeout 300 \
        "$build/bin/zinc-perf" -b 8 -e 8 -n 1 -w 0 -c 1 >"$out/log" 2>&1 || {
        echo "| $n | failed (see below) | | | | |"
        grep -E "WARN|error" "$out/log" | head -5
        continue
    }
    end=$(date +%s.%N)
    grep "init phases" "$out/log" | sed 's/.*init phases (wall\/cpu ms): //' | awk -v n="$n" -v t0="$start" -v t1="$end" '
        # join W/C, peers W/C, ..., barrier W/C; bootstrap sent M msgs B bytes, received M msgs B bytes; cpu C ms in all
        { gsub(/[,;]/, "")
          total = 0
          for (i = 1; i <= 16; i += 2) { split($(i + 1), wc, "/"); w[$i] = wc[1]; total += wc[1] }
          if (total > worst) { worst = total; ph = sprintf("%.0f / %.0f / %.0f / %.0f / %.0f / %.0f", w["join"], w["peers"], w["conns"], w["arena"], w["watch"], w["barrier"]) }
          if ($19 > ms) ms = $19; if ($21 > bs) bs = $21; if ($24 > mr) mr = $24; if ($26 > br) br = $26
          if ($29 > cpu) cpu = $29
          ranks++ }
        END { if (ranks != n) ph = ph " (only " ranks " ranks logged)"
              printf "| %d | %.2f | %s | %.0f | %d / %d | %d / %d |\n", n, t1 - t0, ph, cpu, ms, mr, bs, br }'
done
