#!/usr/bin/env bash
# One rank exits with status 3 while the others sleep: zinc-run reports that rank (and only
# that one), stops the others at once and exits 3.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

# Rank 2 fails only once the other three are asleep, so that there is something to stop.
run_zr -n 4 sh -c '
    if [ "$ZINC_RANK" = 2 ]; then
        while [ "$(ls "$TMP" | grep -c ready)" -lt 3 ]; do sleep 0.05; done
        echo "rank 2 gives up" >&2
        exit 3
    fi
    touch "$TMP/ready.$ZINC_RANK"
    sleep "$1"' "$MARK" "$SLP"
expect_eq "$RC" 3 "exit status"
((ELAPSED_MS < 10000)) || fail "zinc-run took $ELAPSED_MS ms to stop the sleeping ranks"
expect_grep '^zinc-run: rank 2 \(pid [0-9]+\) exited with status 3$' "$TMP/err" "report"
expect_eq "$(grep -c '^zinc-run: rank' "$TMP/err")" 1 "ranks reported (the stopped ones are not causes)"
expect_grep '^rank 2 gives up$' "$TMP/err" "the rank's own message"
# The sleeping ranks (sh) and what they started (sleep) are gone.
expect_gone "$MARK"
expect_gone "sleep $SLP"
echo PASS
