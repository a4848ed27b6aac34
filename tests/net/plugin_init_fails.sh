#!/bin/bash
# net_plugin_init_fails: a plugin whose init fails is skipped with exactly one warning that
# names it and the failure, is listed as not used (with the failure), and the built-in nets
# are still used.
# Usage: plugin_init_fails.sh ZINC_INFO
set -uo pipefail
out=$(ZN_TEST_COUNT_PLUGIN_FAIL_INIT=1 NCCL_NET_PLUGIN=count ZINC_DEBUG=WARN "$1" nets 2>&1)
rc=$?
echo "$out"
[ $rc = 0 ] || { echo "zinc-info failed ($rc)"; exit 1; }
warns=$(grep -c " zinc WARN " <<<"$out")
[ "$warns" = 1 ] || { echo "expected exactly one warning, got $warns"; exit 1; }
grep -qE "WARN NET net Counting \(plugin\): init failed: .+; skipping it" <<<"$out" \
    || { echo "the warning does not name the plugin net and its failure"; exit 1; }
grep -qE "^  Socket +built in" <<<"$out" || { echo "the built-in socket net is not listed"; exit 1; }
usable=$(grep -v " zinc WARN " <<<"$out" | grep "Counting" | grep -v "not used: init failed")
[ -z "$usable" ] || { echo "the failed plugin net is listed as usable: $usable"; exit 1; }
grep -qE "^  Counting +plugin, not used: init failed" <<<"$out" \
    || { echo "the failed plugin net is not listed with its failure"; exit 1; }
exit 0
