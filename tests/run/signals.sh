#!/usr/bin/env bash
# SIGINT or SIGTERM to zinc-run stops every rank and exits 128+signal (130 for SIGINT).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
# Job control: without it bash starts background jobs with SIGINT ignored, and zinc-run, like
# any program, keeps a signal that was ignored when it started.
set -m

# check_signal SIG STATUS
check_signal() {
    rm -f "$TMP"/ready.*
    "$ZR" -n 3 sh -c 'touch "$TMP/ready.$ZINC_RANK"; sleep "$1"' "$MARK" "$SLP" >"$TMP/out" 2>"$TMP/err" &
    local pid=$! rc=0 t0
    wait_for_files 3
    t0=$(now_ms)
    kill -"$1" "$pid"
    wait "$pid" || rc=$?
    expect_eq "$rc" "$2" "exit status after SIG$1"
    (($(now_ms) - t0 < 10000)) || fail "zinc-run took $(($(now_ms) - t0)) ms to stop after SIG$1"
    expect_grep "^zinc-run: received signal [0-9]+ \(.*\); stopping 3 ranks$" "$TMP/err" "message"
    expect_eq "$(grep -c '^zinc-run: rank' "$TMP/err" || true)" 0 "ranks reported as causes"
    expect_gone "$MARK"
    expect_gone "sleep $SLP"
}
check_signal INT 130
check_signal TERM 143
check_signal HUP 129
echo PASS
