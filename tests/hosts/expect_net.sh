#!/bin/bash
# Run a zinc-run job and check that it passed and that every rank's net transport used net NAME
# (so a collective test through a plugin proves the plugin carried the traffic).
# Usage: expect_net.sh NAME NRANKS COMMAND ARGS...
set -uo pipefail
name=$1 nranks=$2
shift 2
log=$(mktemp)
trap 'rm -f "$log"' EXIT
ZINC_DEBUG=INFO ZINC_DEBUG_SUBSYS=INIT,NET "$@" >"$log" 2>&1
rc=$?
grep -v " INFO " "$log"
[ $rc = 0 ] || { echo "expect_net: the job failed (exit $rc)"; exit 1; }
got=$(grep -c "net transport: net $name," "$log")
[ "$got" = "$nranks" ] || { echo "expect_net: $got of $nranks ranks used net $name"; exit 1; }
echo "expect_net: all $nranks ranks used net $name"
