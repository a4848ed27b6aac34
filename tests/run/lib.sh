# shellcheck shell=bash disable=SC2034  # sourced: the variables are used by the tests
# Helpers shared by the zinc-run tests. A test sources this file with the path of zinc-run as its
# first argument; it gets $ZR, a private temporary directory $TMP and the functions below.
export LC_ALL=C
ZR=${1:?usage: $0 PATH_TO_ZINC_RUN}
[[ -x $ZR ]] || { echo "FAIL: $ZR is not executable" >&2; exit 1; }
TMP=$(mktemp -d)
export TMP # the ranks write their ready files here
trap 'rm -rf "$TMP"' EXIT
# Unique strings to find this test's processes with pgrep -f: a marker passed as sh's $0, and a
# sleep length no other process uses.
MARK="zr-test-$$-$RANDOM"
SLP="99.$$$RANDOM"

fail() {
    echo "FAIL: $*" >&2
    for f in "$TMP"/out "$TMP"/err; do [[ -f $f ]] && { echo "--- $f:"; cat "$f"; } >&2; done
    exit 1
}

expect_eq() { [[ "$1" == "$2" ]] || fail "$3: expected [$2], got [$1]"; }

# expect_grep REGEX FILE WHAT: FILE has a line matching the extended REGEX.
expect_grep() { grep -qE -- "$1" "$2" || fail "$3: no line of $2 matches /$1/"; }

now_ms() { echo $((${EPOCHREALTIME/./} / 1000)); }

# run_zr ARGS...: run zinc-run to $TMP/out and $TMP/err; sets RC and ELAPSED_MS.
run_zr() {
    local t0
    t0=$(now_ms)
    RC=0
    "$ZR" "$@" >"$TMP/out" 2>"$TMP/err" || RC=$?
    ELAPSED_MS=$(($(now_ms) - t0))
}

# wait_for_files N: wait (up to 20 s) until N ranks have touched $TMP/ready.RANK.
wait_for_files() {
    for _ in $(seq 400); do
        (($(find "$TMP" -name 'ready.*' | wc -l) >= $1)) && return 0
        sleep 0.05
    done
    fail "only $(find "$TMP" -name 'ready.*' | wc -l) of $1 ranks got ready"
}

# expect_gone PATTERN: no process matching PATTERN is left (signals take a moment to land on
# processes that zinc-run does not reap itself, so allow up to 10 s on a busy machine).
expect_gone() {
    for _ in $(seq 200); do
        pgrep -f -- "$1" >/dev/null || return 0
        sleep 0.05
    done
    fail "processes matching '$1' are still running: $(pgrep -af -- "$1")"
}
