#!/usr/bin/env bash
# --tag-output holds two pipes per rank, so with many ranks zinc-run must raise a soft file
# descriptor limit (1024 is common) and give the ranks the original limit back.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

if (($(ulimit -Hn) < 2200)); then
    echo "SKIP: the hard file descriptor limit $(ulimit -Hn) is too low for 1024 tagged ranks"
    exit 77
fi

ulimit -Sn 128
run_zr -n 100 --tag-output sh -c 'ulimit -Sn'
expect_eq "$RC" 0 "exit status with 100 tagged ranks under a limit of 128"
expect_eq "$(sed 's|^\[[0-9]*\] ||' "$TMP/out" | sort | uniq -c | awk '{print $1, $2}')" "100 128" \
    "the ranks' fd limit"

ulimit -Sn 1024
run_zr -n 1024 --tag-output printenv ZINC_RANK
expect_eq "$RC" 0 "exit status with 1024 tagged ranks"
expect_eq "$(sort -k2n "$TMP/out")" "$(seq 0 1023 | sed 's|.*|[&] &|')" "1024 ranks' tagged output"
expect_eq "$(cat "$TMP/err")" "" "stderr"
echo PASS
