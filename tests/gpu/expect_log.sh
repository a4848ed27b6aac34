#!/bin/bash
# Run a command, print its output, and fail unless it succeeded and its output has PATTERN
# (a grep -E pattern): for tests of which path the library chose.
# Usage: expect_log.sh PATTERN COMMAND ARGS...
set -uo pipefail
pattern=$1; shift
log=$(mktemp)
trap 'rm -f "$log"' EXIT
"$@" >"$log" 2>&1
rc=$?
cat "$log"
[ $rc = 0 ] || exit $rc
grep -qE "$pattern" "$log" || { echo "expected output matching: $pattern"; exit 1; }
