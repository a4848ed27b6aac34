#!/usr/bin/env bash
# Every rank gets its rank, the job size and one rendezvous address, under zinc's and torchrun's
# names; a preset ZINC_COMM_ID (or NCCL_COMM_ID) is passed through unchanged.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

run_zr -n 4 sh -c 'echo $ZINC_RANK $ZINC_NRANKS $ZINC_LOCAL_RANK $ZINC_LOCAL_NRANKS $RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE'
expect_eq "$RC" 0 "exit status"
expect_eq "$(sort "$TMP/out")" "$(printf '%s\n' '0 4 0 4 0 4 0 4' '1 4 1 4 1 4 1 4' '2 4 2 4 2 4 2 4' '3 4 3 4 3 4 3 4')" "rank variables"
expect_eq "$(cat "$TMP/err")" "" "stderr of a successful job"

# A chosen address: one value, 127.0.0.1:<port>, the same in every rank and under both names.
run_zr -n 3 sh -c 'echo "$ZINC_COMM_ID $NCCL_COMM_ID"'
expect_eq "$RC" 0 "exit status"
expect_eq "$(wc -l <"$TMP/out")" 3 "line count"
expect_eq "$(sort -u "$TMP/out" | wc -l)" 1 "distinct addresses"
read -r zid nid <"$TMP/out"
[[ $zid =~ ^127\.0\.0\.1:[0-9]+$ ]] || fail "ZINC_COMM_ID is [$zid]"
port=${zid#*:}
((port > 0 && port < 65536)) || fail "port $port"
expect_eq "$nid" "$zid" "NCCL_COMM_ID"

# A new port per job: two jobs in a row must not be handed the same fixed port.
run_zr -n 1 sh -c 'echo "$ZINC_COMM_ID"'
run_zr -n 1 sh -c 'echo "$ZINC_COMM_ID"'
zid2=$(cat "$TMP/out")
[[ $zid2 =~ ^127\.0\.0\.1:[0-9]+$ ]] || fail "second ZINC_COMM_ID is [$zid2]"

ZINC_COMM_ID=10.1.2.3:4567 run_zr -n 2 sh -c 'echo "$ZINC_COMM_ID $NCCL_COMM_ID"'
expect_eq "$(cat "$TMP/out")" "$(printf '%s\n' '10.1.2.3:4567 10.1.2.3:4567' '10.1.2.3:4567 10.1.2.3:4567')" "preset ZINC_COMM_ID"

env -u ZINC_COMM_ID NCCL_COMM_ID=10.9.8.7:1234 "$ZR" -n 1 sh -c 'echo "$ZINC_COMM_ID $NCCL_COMM_ID"' >"$TMP/out"
expect_eq "$(cat "$TMP/out")" "10.9.8.7:1234 10.9.8.7:1234" "preset NCCL_COMM_ID"

# Without --tag-output the ranks write straight to zinc-run's stdout and stderr, unprefixed.
run_zr -n 1 sh -c 'echo to-out; echo to-err >&2'
expect_eq "$(cat "$TMP/out")" "to-out" "untagged stdout"
expect_eq "$(cat "$TMP/err")" "to-err" "untagged stderr"
echo PASS
