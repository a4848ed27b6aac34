#!/bin/bash
# After the GPU tests (ctest fixture cleanup): how many ran, how many skipped and why, from the
# verdicts gpu_run.sh logged. Printed, and kept beside the log as gpu-tests.txt. Exits 77 when
# no GPU test ran on a machine without GPUs (CI), and fails when a GPU is present but every GPU
# test skipped, so that such a run cannot pass unnoticed.
# Usage: gpu_summary.sh LOG
set -uo pipefail
log=$1
summary=${log%.log}.txt
ran=0 skipped=0
[ -f "$log" ] && ran=$(awk -F'\t' '$2 == "ran"' "$log" | wc -l) && skipped=$(awk -F'\t' '$2 == "skip"' "$log" | wc -l)
{
    echo "GPU tests: $ran ran, $skipped skipped"
    [ -f "$log" ] && awk -F'\t' '$2 == "skip" { n[$3]++ } END { for (w in n) printf "  %d skipped: %s\n", n[w], w }' "$log" | sort -rn
    [ -f "$log" ] && awk -F'\t' '$2 == "ran" { n[$3]++ } END { for (w in n) printf "  %d ran with %s\n", n[w], w }' "$log" | sort -rn
} | tee "$summary"
[ "$ran" -gt 0 ] && exit 0
if compgen -G "/dev/nvidia[0-9]*" >/dev/null; then
    echo "FAIL: this machine has a GPU ($(compgen -G '/dev/nvidia[0-9]*' | head -1)) but no GPU test ran"
    exit 1
fi
echo "SKIP: no GPU test ran (no GPU on this machine)"
exit 77
