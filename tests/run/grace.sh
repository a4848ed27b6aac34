#!/usr/bin/env bash
# Ranks that ignore SIGTERM are killed with SIGKILL after the 3 s grace period.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

run_zr -n 3 sh -c '
    trap "" TERM
    if [ "$ZINC_RANK" = 0 ]; then
        while [ "$(ls "$TMP" | grep -c ready)" -lt 2 ]; do sleep 0.05; done
        exit 5
    fi
    touch "$TMP/ready.$ZINC_RANK"
    sleep "$1"' "$MARK" "$SLP"
expect_eq "$RC" 5 "exit status"
((ELAPSED_MS >= 2500 && ELAPSED_MS < 15000)) || fail "stopping took $ELAPSED_MS ms, not about 3 s"
expect_grep '^zinc-run: rank 0 \(pid [0-9]+\) exited with status 5$' "$TMP/err" "report"
expect_grep '^zinc-run: ranks 1-2 did not stop within 3 s of SIGTERM; sending SIGKILL$' "$TMP/err" "escalation"
expect_eq "$(grep -c '^zinc-run: rank ' "$TMP/err")" 1 "ranks reported"
expect_gone "$MARK"
expect_gone "sleep $SLP"
echo PASS
