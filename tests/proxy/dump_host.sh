#!/bin/bash
# The state dump of a host-only job (no GPU, so no proxy): `zinc-info --dump PID` makes a rank
# print its communicators to its log -- the one waiting in ncclRecv shows that receive pending
# -- and the rank survives. A process that does not catch the signal (sleep) is refused, and
# not killed. Usage: dump_host.sh ZINC_RUN DUMP_RANK ZINC_INFO
set -euo pipefail
zr=$1
prog=$2
info=$3
dir=$(mktemp -d)
sleeper=
trap '[ -n "$sleeper" ] && kill "$sleeper" 2>/dev/null; rm -rf "$dir"' EXIT
fail() {
    echo "dump_host.sh: FAIL: $*"
    for f in "$dir"/log.* "$dir"/out; do [ -e "$f" ] && { echo "--- $f"; cat "$f"; }; done
    exit 1
}
export ZINC_PROXY_DUMP_SIGNAL=12 ZINC_DEVICE=host ZINC_TIMEOUT=120 DUMP_DIR=$dir
export ZINC_DEBUG_FILE=$dir/log.%p
"$zr" -n 2 --timeout 150 "$prog" >"$dir/out" 2>&1 &
job=$!
for _ in $(seq 1200); do
    [ -e "$dir/recv" ] && [ -s "$dir/pid.0" ] && [ -s "$dir/pid.1" ] && break
    sleep 0.1
done
[ -e "$dir/recv" ] || fail "the ranks did not start"
pid0=$(cat "$dir/pid.0")
pid1=$(cat "$dir/pid.1")
# Rank 1 wrote "recv" just before its ncclRecv: dump until the log shows it inside.
for _ in $(seq 300); do
    "$info" --dump "$pid1" >/dev/null || fail "zinc-info --dump $pid1 failed"
    sleep 0.1
    grep -q "pending: recv of 4 elements from rank 0" "$dir/log.$pid1" 2>/dev/null && break
done
"$info" --dump "$pid0" >/dev/null || fail "zinc-info --dump $pid0 failed"
for _ in $(seq 300); do
    grep -q "state dump: end" "$dir/log.$pid0" 2>/dev/null && break
    sleep 0.1
done
touch "$dir/go"
wait "$job" || fail "the job failed (a rank killed by the dump signal?)"
grep -q "dump_rank: 2 ranks: 0 failures" "$dir/out" || fail "the job's result"
l1=$dir/log.$pid1
grep -q "state dump: comm .* rank 1 of 2, host, hash [0-9a-f]*: no error" "$l1" || fail "rank 1's comm"
grep -q "pending: recv of 4 elements from rank 0" "$l1" || fail "rank 1's pending receive"
grep -q "peers by transport: 0 shm" "$l1" || fail "rank 1's peers"
grep -q "state dump: comm .* rank 0 of 2, host" "$dir/log.$pid0" || fail "rank 0's comm"
grep -q "idle; 0 operations issued" "$dir/log.$pid0" || fail "rank 0 idle"
# A process without the handler is refused, and lives on.
sleep 60 &
sleeper=$!
if out=$("$info" --dump "$sleeper" 2>&1); then fail "zinc-info --dump of sleep succeeded: $out"; fi
grep -q "has no handler for signal 12" <<<"$out" || fail "zinc-info's message: $out"
kill -0 "$sleeper" 2>/dev/null || fail "sleep was killed"
echo "dump_host.sh: ok"
