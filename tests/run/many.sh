#!/usr/bin/env bash
# Many ranks: 64 and 512 of true, and 128 that each print their rank.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

for n in 64 512; do
    run_zr -n "$n" true
    expect_eq "$RC" 0 "exit status with $n ranks"
    expect_eq "$(cat "$TMP/out" "$TMP/err")" "" "output with $n ranks"
done

run_zr -n 128 printenv ZINC_RANK
expect_eq "$RC" 0 "exit status"
expect_eq "$(sort -n "$TMP/out")" "$(seq 0 127)" "128 ranks' output"
echo PASS
