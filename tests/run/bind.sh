#!/usr/bin/env bash
# --bind: ranks get disjoint CPU sets. cores (the default) splits the CPUs zinc-run may use into
# one block per rank, core gives each rank one CPU, none leaves the affinity alone. The
# reference is taskset's view of the CPUs zinc-run started with.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

cpus() { # the CPU numbers of a list such as 0-3,6
    local out=() part
    IFS=, read -ra parts <<<"$1"
    for part in "${parts[@]}"; do
        if [[ $part == *-* ]]; then out+=($(seq "${part%-*}" "${part#*-}")); else out+=("$part"); fi
    done
    echo "${out[@]}"
}
mine='grep Cpus_allowed_list /proc/self/status | cut -f2'
all=($(cpus "$(sh -c "$mine")"))
n=${#all[@]}

# One rank and the default: every CPU stays.
run_zr -n 1 sh -c "$mine"
expect_eq "$(cpus "$(cat "$TMP/out")")" "${all[*]}" "one rank, default bind"

# Two ranks, default (cores): each gets n/2 consecutive allowed CPUs, rank 0 the first block.
if ((n >= 2)); then
    run_zr -n 2 --tag-output sh -c "$mine"
    expect_eq "$RC" 0 "exit status"
    half=$((n / 2))
    expect_eq "$(cpus "$(sed -n 's/^\[0\] //p' "$TMP/out")")" "${all[*]:0:half}" "rank 0's block"
    expect_eq "$(cpus "$(sed -n 's/^\[1\] //p' "$TMP/out")")" "${all[*]:half:half}" "rank 1's block"
fi

# --bind core: the r-th CPU only.
run_zr -n 1 --bind core sh -c "$mine"
expect_eq "$(cpus "$(cat "$TMP/out")")" "${all[0]}" "--bind core"

# --bind none: untouched, whatever the rank count.
run_zr -n 2 --bind none sh -c "$mine"
expect_eq "$(sort -u "$TMP/out" | wc -l)" 1 "--bind none: one CPU list"
expect_eq "$(cpus "$(head -1 "$TMP/out")")" "${all[*]}" "--bind none"

# A rank per CPU and more: the default does not bind past the CPU count.
run_zr -n $((n + 1)) sh -c "$mine"
expect_eq "$(sort -u "$TMP/out")" "$(sh -c "$mine")" "more ranks than CPUs"

run_zr -n 1 --bind sockets true
expect_eq "$RC" 2 "an unknown --bind value"
echo PASS
