#!/bin/bash
# Run a command, print its output, and fail unless it succeeded and its output has PATTERN
# (a grep -E pattern): for tests of which path the library chose. With EXPECT_FAIL=1 the
# command must fail instead (and print PATTERN): for tests of the error a misuse gets.
# Usage: [EXPECT_FAIL=1] expect_log.sh PATTERN COMMAND ARGS...
set -uo pipefail
pattern=$1; shift
log=$(mktemp)
trap 'rm -f "$log"' EXIT
"$@" >"$log" 2>&1
rc=$?
cat "$log"
if [ "${EXPECT_FAIL:-0}" = 1 ]; then
    [ $rc != 0 ] || { echo "expected the command to fail"; exit 1; }
else
    [ $rc = 0 ] || exit $rc
fi
grep -qE "$pattern" "$log" || { echo "expected output matching: $pattern"; exit 1; }
