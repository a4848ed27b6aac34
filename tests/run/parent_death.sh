#!/usr/bin/env bash
# Ranks never outlive zinc-run, even when it is killed with SIGKILL and cannot stop them itself.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

"$ZR" -n 3 sleep "$SLP" &
pid=$!
for _ in $(seq 200); do
    (($(pgrep -fc "^sleep $SLP") == 3)) && break
    sleep 0.05
done
expect_eq "$(pgrep -fc "^sleep $SLP")" 3 "ranks running"
kill -KILL "$pid"
wait "$pid" || true
expect_gone "sleep $SLP"
echo PASS
