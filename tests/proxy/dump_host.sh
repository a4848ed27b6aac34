#!/bin/bash
# The state dump of host-only jobs (no GPU, so no proxy): `zinc-info --dump PID` makes a rank
# print its communicators to its log -- the rank waiting in ncclRecv (libnccl) or zincConnWait
# (libmscclpp) shows that -- and the rank survives. A process that does not catch the signal
# (sleep) is refused, and not killed.
# Usage: dump_host.sh ZINC_RUN DUMP_RANK MSC_SHM_CHECK ZINC_INFO
set -euo pipefail
zr=$1
nccl_prog=$2
msc_prog=$3
info=$4
dir=$(mktemp -d)
sleeper=
trap '[ -n "$sleeper" ] && kill "$sleeper" 2>/dev/null; rm -rf "$dir"' EXIT
fail() {
    echo "dump_host.sh: FAIL: $*"
    for f in "$dir"/*/log.* "$dir"/*/out; do [ -e "$f" ] && { echo "--- $f"; cat "$f"; }; done
    exit 1
}
export ZINC_PROXY_DUMP_SIGNAL=12 ZINC_DEVICE=host ZINC_TIMEOUT=120

# run_job NAME PENDING_LINE PROGRAM ARGS...: a 2-rank job in $dir/NAME whose rank 1 waits until
# rank 0 sees the file "go"; rank 1 is dumped until its log shows PENDING_LINE, rank 0 once;
# sets d, pid0, pid1.
run_job() {
    local name=$1 pending=$2
    shift 2
    d=$dir/$name
    mkdir "$d"
    DUMP_DIR=$d ZINC_DEBUG_FILE=$d/log.%p "$zr" -n 2 --timeout 150 "$@" >"$d/out" 2>&1 &
    local job=$!
    for _ in $(seq 1200); do
        [ -e "$d/recv" ] && [ -s "$d/pid.0" ] && [ -s "$d/pid.1" ] && break
        sleep 0.1
    done
    [ -e "$d/recv" ] || fail "$name: the ranks did not start"
    pid0=$(cat "$d/pid.0")
    pid1=$(cat "$d/pid.1")
    # Rank 1 wrote "recv" just before its wait: dump until the log shows it inside.
    for _ in $(seq 300); do
        "$info" --dump "$pid1" >/dev/null || fail "$name: zinc-info --dump $pid1 failed"
        sleep 0.1
        grep -q "$pending" "$d/log.$pid1" 2>/dev/null && break
    done
    "$info" --dump "$pid0" >/dev/null || fail "$name: zinc-info --dump $pid0 failed"
    for _ in $(seq 300); do
        grep -q "state dump: end" "$d/log.$pid0" 2>/dev/null && break
        sleep 0.1
    done
    touch "$d/go"
    wait "$job" || fail "$name: the job failed (a rank killed by the dump signal?)"
}

run_job nccl "pending: recv of 4 elements from rank 0" "$nccl_prog"
grep -q "dump_rank: 2 ranks: 0 failures" "$d/out" || fail "nccl: the job's result"
l1=$d/log.$pid1
grep -q "state dump: comm .* rank 1 of 2, host, hash [0-9a-f]*: no error" "$l1" || fail "rank 1's comm"
grep -q "pending: recv of 4 elements from rank 0" "$l1" || fail "rank 1's pending receive"
grep -q "peers by transport: 0 shm" "$l1" || fail "rank 1's peers"
grep -q "state dump: comm .* rank 0 of 2, host" "$d/log.$pid0" || fail "rank 0's comm"
grep -q "idle; 0 operations issued" "$d/log.$pid0" || fail "rank 0 idle"

run_job msc "connection 0 to rank 0 tag 0: SHM, 64 bytes here, 64 at the peer, set up" \
    "$msc_prog" dumpwait
grep -q "state dump: mscclpp comm .* rank 1 of 2, no GPU: 1 connections declared (1 SHM" \
    "$d/log.$pid1" || fail "msc: rank 1's comm"
grep -q "state dump: mscclpp comm .* rank 0 of 2" "$d/log.$pid0" || fail "msc: rank 0's comm"

# A process without the handler is refused, and lives on.
sleep 60 &
sleeper=$!
# $! is the forked shell until it has exec'd sleep (a shell catches signals of its own).
for _ in $(seq 300); do
    [ "$(cat "/proc/$sleeper/comm" 2>/dev/null)" = sleep ] && break
    sleep 0.01
done
if out=$("$info" --dump "$sleeper" 2>&1); then fail "zinc-info --dump of sleep succeeded: $out"; fi
grep -q "has no handler for signal 12" <<<"$out" || fail "zinc-info's message: $out"
kill -0 "$sleeper" 2>/dev/null || fail "sleep was killed"
echo "dump_host.sh: ok"
