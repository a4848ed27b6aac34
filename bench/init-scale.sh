#!/bin/bash
# Communicator init at scale on one host: N ranks started by zinc-run, each doing
# ncclCommInitRank, one 8-byte allreduce and ncclCommDestroy (bench/init_scale.c), and what init
# cost each rank from the INFO line "init phases" (zn_comm_setup).
#   bench/init-scale.sh [N...]        (default: 64 128 256 512)
# Columns: wall time of the whole job, and of the same job done by zinc-perf (-b 8 -e 8 -n 1
# -w 0: init inside a group, on a thread of its own, then 10 small allreduces); when the last rank finished init and the allreduce
# (seconds after the launch); the slowest rank's init phases (wall ms; a collective phase
# absorbs the waiting for ranks still in the local phases before it); the most CPU a rank spent
# in init; the bootstrap messages and bytes a rank sent and received (the largest over ranks).
# Limits that apply first: one shared-memory arena of ZINC_SHM_SLOT_SIZE (1 MB) x N bytes in
# /dev/shm; a rank holds about 3 log2(N) + 3 bootstrap sockets and a pidfd per local peer it
# waited on (ulimit -n).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$here/build}
[ -x "$build/bin/zinc-run" ] || { echo "build zinc first (make)"; exit 2; }
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(64 128 256 512)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cc -O2 -I"$here/include" "$here/bench/init_scale.c" -L"$build/lib" -lnccl \
    -Wl,-rpath,"$build/lib" -o "$out/init_scale"

shm_free=$(df -B1 --output=avail /dev/shm | tail -1)
echo "init + one allreduce + destroy, host communicators, $(nproc) cores, $(date -u +%Y-%m-%d)," \
     "/dev/shm free $((shm_free >> 20)) MB, ulimit -n $(ulimit -n)"
echo
echo "| ranks | wall s | zinc-perf wall s | all init done s | allreduce done s | slowest rank: join / peers / conns / arena / watch / barrier ms | init CPU ms per rank (max) | msgs sent / recv per rank (max) | bytes sent / recv per rank (max) |"
echo "| ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: |"
for n in "${sizes[@]}"; do
    slot=$((1 << 20))
    if [ $((slot * n)) -ge "$shm_free" ]; then
        echo "| $n | skipped: the arena needs $((slot * n >> 20)) MB of /dev/shm | | | | | | | |"
        continue
    fi
    start=$(date +%s.%N)
    ZINC_DEBUG=INFO ZINC_DEBUG_SUBSYS=INIT "$build/bin/zinc-run" -n "$n" --timeout 300 \
        "$out/init_scale" >"$out/times" 2>"$out/log" || {
        echo "| $n | failed (see below) | | | | | | | |"
        grep -E "WARN|error|failed" "$out/log" | head -5
        continue
    }
    end=$(date +%s.%N)
    p0=$(date +%s.%N)
    perf_wall=failed
    "$build/bin/zinc-run" -n "$n" --timeout 300 "$build/bin/zinc-perf" -b 8 -e 8 -n 1 -w 0 \
        -c 1 >/dev/null 2>&1 && perf_wall=$(echo "$(date +%s.%N) - $p0" | bc)
    done_at=$(awk -v t0="$start" '{ if ($6 > i) i = $6; if ($8 > a) a = $8 }
        END { printf "%.2f | %.2f", i / 1e3 - t0, a / 1e3 - t0 }' "$out/times")
    # Builds before 2026-11-24 print no phases: their rows have the times only.
    { grep "init phases" "$out/log" || true; } | sed 's/.*init phases (wall\/cpu ms): //' | awk -v n="$n" -v t0="$start" -v t1="$end" -v done_at="$done_at" -v perf="$perf_wall" '
        # join W/C, peers W/C, ..., barrier W/C; bootstrap sent M msgs B bytes, received M msgs B bytes; cpu C ms in all
        { gsub(/[,;]/, "")
          total = 0
          for (i = 1; i <= 16; i += 2) { split($(i + 1), wc, "/"); w[$i] = wc[1]; total += wc[1] }
          if (total > worst) { worst = total; ph = sprintf("%.0f / %.0f / %.0f / %.0f / %.0f / %.0f", w["join"], w["peers"], w["conns"], w["arena"], w["watch"], w["barrier"]) }
          if ($19 > ms) ms = $19; if ($21 > bs) bs = $21; if ($24 > mr) mr = $24; if ($26 > br) br = $26
          if ($29 > cpu) cpu = $29
          ranks++ }
        END { if (ranks != n) ph = ph " (only " ranks " ranks logged)"
              printf "| %d | %.2f | %.2f | %s | %s | %.0f | %d / %d | %d / %d |\n", n, t1 - t0, perf, done_at, ph, cpu, ms, mr, bs, br }'
done
