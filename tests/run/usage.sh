#!/usr/bin/env bash
# Bad command lines and programs that cannot be executed fail with a clear message.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

# expect_usage_error REGEX ARGS...: zinc-run exits 2 and says REGEX, without starting anything.
expect_usage_error() {
    local want=$1
    shift
    run_zr "$@"
    expect_eq "$RC" 2 "exit status of: zinc-run $*"
    expect_grep "^zinc-run: $want" "$TMP/err" "message of: zinc-run $*"
    expect_grep '^usage: zinc-run' "$TMP/err" "usage line of: zinc-run $*"
    expect_eq "$(cat "$TMP/out")" "" "stdout of: zinc-run $*"
}
expect_usage_error "-n needs a whole number.*not '0'" -n 0 echo hi
expect_usage_error "-n needs a whole number.*not '-3'" -n -3 echo hi
expect_usage_error "-n needs a whole number.*not 'four'" -np four echo hi
expect_usage_error "missing -n N" echo hi
expect_usage_error "missing PROGRAM" -n 2
expect_usage_error "missing PROGRAM" -n 2 --
expect_usage_error "option -n needs a value" -n
expect_usage_error "unknown option '--bogus'" -n 2 --bogus echo hi
expect_usage_error "--timeout needs a positive number.*not '0'" -n 1 --timeout 0 true
expect_usage_error "--timeout needs a positive number.*not 'soon'" -n 1 -t soon true

# A program that cannot be executed: each rank says why and exits 127, which fails the job.
run_zr -n 2 ./no-such-program-"$MARK"
expect_eq "$RC" 127 "exit status for a missing program"
expect_grep "^zinc-run: cannot execute \./no-such-program-$MARK: No such file or directory$" "$TMP/err" "message"
expect_grep '^zinc-run: rank [01] \(pid [0-9]+\) exited with status 127$' "$TMP/err" "report"
run_zr -n 1 "$TMP"
expect_eq "$RC" 127 "exit status for a directory"
expect_grep "^zinc-run: cannot execute $TMP: Permission denied$" "$TMP/err" "message"

# The forms that are fine: -h, -np, "--" before a program whose arguments look like options.
run_zr -h
expect_eq "$RC" 0 "exit status of -h"
expect_grep '^usage: zinc-run -n N' "$TMP/out" "help text"
run_zr -np 2 -- sh -c 'echo "$ZINC_RANK $1"' sh -n
expect_eq "$RC" 0 "exit status of -np 2 --"
expect_eq "$(sort "$TMP/out")" "$(printf '%s\n' '0 -n' '1 -n')" "output"
echo PASS
