#!/usr/bin/env bash
# --timeout stops a job that runs too long, names the ranks still running and exits 124.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

run_zr --timeout 1 -n 3 sleep "$SLP"
expect_eq "$RC" 124 "exit status"
((ELAPSED_MS >= 900 && ELAPSED_MS < 10000)) || fail "a 1 s timeout took $ELAPSED_MS ms"
expect_eq "$(cat "$TMP/err")" "zinc-run: timeout after 1 s; stopping 3 ranks: 0-2" "message"
expect_gone "sleep $SLP"

# Fractional seconds, the short and = forms, and only the ranks still running are named.
run_zr -t=0.5 -n 4 sh -c '[ "$ZINC_RANK" = 1 ] || sleep "$1"' "$MARK" "$SLP"
expect_eq "$RC" 124 "exit status"
((ELAPSED_MS >= 400 && ELAPSED_MS < 10000)) || fail "a 0.5 s timeout took $ELAPSED_MS ms"
expect_eq "$(cat "$TMP/err")" "zinc-run: timeout after 0.5 s; stopping 3 ranks: 0,2-3" "message"
expect_gone "$MARK"

# A job that ends in time is not affected.
run_zr --timeout 30 -n 2 true
expect_eq "$RC" 0 "exit status"
((ELAPSED_MS < 10000)) || fail "a quick job with a 30 s timeout took $ELAPSED_MS ms"
expect_eq "$(cat "$TMP/err")" "" "stderr"
echo PASS
