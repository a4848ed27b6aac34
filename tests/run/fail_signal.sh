#!/usr/bin/env bash
# One rank is killed by SIGKILL: zinc-run names the signal and exits 128+9.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

run_zr -n 3 sh -c '
    if [ "$ZINC_RANK" = 1 ]; then
        while [ "$(ls "$TMP" | grep -c ready)" -lt 2 ]; do sleep 0.05; done
        kill -9 $$
    fi
    touch "$TMP/ready.$ZINC_RANK"
    sleep "$1"' "$MARK" "$SLP"
expect_eq "$RC" 137 "exit status"
((ELAPSED_MS < 10000)) || fail "zinc-run took $ELAPSED_MS ms"
expect_grep '^zinc-run: rank 1 \(pid [0-9]+\) was killed by signal 9 \(Killed\)$' "$TMP/err" "report"
expect_eq "$(grep -c '^zinc-run: rank' "$TMP/err")" 1 "ranks reported"
expect_gone "$MARK"
expect_gone "sleep $SLP"
echo PASS
