#!/usr/bin/env bash
# --tag-output prefixes every line with "[RANK] ", keeps stdout and stderr apart, keeps lines
# whole when they arrive in pieces or are longer than a pipe read, and flushes a last partial line.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

run_zr -n 3 --tag-output sh -c '
    r=$ZINC_RANK
    echo "out $r"
    echo "err $r" >&2
    printf "piece-$r-"; sleep 0.2; printf "whole\n"
    head -c 10000 /dev/zero | tr "\0" x; echo
    printf "partial $r"'
expect_eq "$RC" 0 "exit status"
long=$(head -c 10000 /dev/zero | tr '\0' x)
for r in 0 1 2; do
    expect_eq "$(grep "^\[$r\] " "$TMP/out")" \
        "$(printf '%s\n' "[$r] out $r" "[$r] piece-$r-whole" "[$r] $long" "[$r] partial $r")" "stdout of rank $r"
done
expect_eq "$(wc -l <"$TMP/out")" 12 "stdout line count"
expect_eq "$(sort "$TMP/err")" "$(printf '%s\n' '[0] err 0' '[1] err 1' '[2] err 2')" "stderr"

# Two-digit ranks, and a rank's last output comes out before zinc-run's verdict on it.
run_zr -n 12 --tag-output sh -c '[ "$ZINC_RANK" = 11 ] || exit 0; echo "dying" >&2; exit 4'
expect_eq "$RC" 4 "exit status"
expect_eq "$(head -n1 "$TMP/err")" "[11] dying" "first stderr line"
expect_grep '^zinc-run: rank 11 \(pid [0-9]+\) exited with status 4$' "$TMP/err" "report"
echo PASS
