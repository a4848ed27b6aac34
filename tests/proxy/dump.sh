#!/bin/bash
# The state dump end to end: a process holding a proxy, started with ZINC_PROXY_DUMP_SIGNAL,
# prints its state when `zinc-info --dump PID` signals it; without the parameter zinc-info
# refuses and names it.  Usage: dump.sh TEST_PROXY_SERVICE ZINC_INFO
set -euo pipefail
holder=$1
info=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export ZINC_PROXY_DUMP_SIGNAL=12
"$holder" --hold "$dir" &
pid=$!
for _ in $(seq 600); do
    [ -e "$dir/ready" ] && break
    sleep 0.1
done
[ -e "$dir/ready" ] || { echo "dump.sh: the holder did not start"; kill "$pid"; exit 1; }
"$info" --dump "$pid"
wait "$pid" || { echo "dump.sh: no dump in the holder's log"; cat "$dir/log"; exit 1; }
grep -q "proxy dump: pid $pid," "$dir/log"
grep -q "net progress: 0 ops completed" "$dir/log"
if out=$(env -u ZINC_PROXY_DUMP_SIGNAL -u NCCL_PROXY_DUMP_SIGNAL "$info" --dump "$pid" 2>&1); then
    echo "dump.sh: zinc-info --dump without the parameter succeeded"; exit 1
fi
grep -q ZINC_PROXY_DUMP_SIGNAL <<<"$out"
echo "dump.sh: ok"
