#!/bin/bash
# gpu_run.sh and gpu_summary.sh on made-up machines (a stand-in nvidia-smi; no GPU needed):
# tests whose ranks can share a GPU run on one GPU with the channel cap, tests that need
# distinct GPUs skip saying why, and the summary counts both.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
# fake_gpus N [MODE]: an nvidia-smi that lists N GPUs in compute mode MODE (Default).
fake_gpus() {
    mkdir -p "$tmp/bin"
    cat >"$tmp/bin/nvidia-smi" <<EOS
#!/bin/bash
for i in \$(seq 0 \$(($1 - 1))); do
    if [ "\$1" = -L ]; then echo "GPU \$i: NVIDIA H100 80GB HBM3 (UUID: GPU-\$i)"; else echo "${2:-Default}"; fi
done
EOS
    chmod +x "$tmp/bin/nvidia-smi"
}
export ZINC_GPU_TEST_LOG=$tmp/gpu-tests.log
unset ZINC_GPU_CHANNELS CUDA_VISIBLE_DEVICES
show='echo "channels=${ZINC_GPU_CHANNELS-unset}"'
run() { PATH="$tmp/bin:$PATH" bash "$here/gpu_run.sh" "$@" 2>&1; }

fake_gpus 1
out=$(run shared 2 1 - sh -c "$show"); rc=$?
[ $rc = 0 ] && grep -q "channels=16" <<<"$out" || fail "2 ranks on 1 GPU: rc=$rc, $out"
out=$(run own 1 1 - sh -c "$show"); rc=$?
[ $rc = 0 ] && grep -q "channels=unset" <<<"$out" || fail "1 rank on 1 GPU: rc=$rc, $out"
out=$(ZINC_GPU_CHANNELS=7 run set 4 1 - sh -c "$show"); rc=$?
[ $rc = 0 ] && grep -q "channels=7" <<<"$out" || fail "a test's own channel count: rc=$rc, $out"
out=$(run mixed 3 2 "ranks on two GPUs" sh -c "$show"); rc=$?
[ $rc = 77 ] && grep -q "SKIP: needs 2 distinct GPUs (ranks on two GPUs); this machine has 1" <<<"$out" ||
    fail "distinct GPUs on 1 GPU: rc=$rc, $out"
out=$(run failing 2 1 - false); rc=$?
[ $rc = 1 ] || fail "a failing test must fail: rc=$rc, $out"

fake_gpus 2 Exclusive_Process
out=$(run exclusive 3 1 - true); rc=$?
[ $rc = 77 ] && grep -q "not in Default compute mode" <<<"$out" || fail "exclusive mode: rc=$rc, $out"
out=$(run exclusive_own 2 2 "x" sh -c "$show"); rc=$?
[ $rc = 0 ] && grep -q "channels=unset" <<<"$out" || fail "2 ranks on 2 GPUs: rc=$rc, $out"
out=$(CUDA_VISIBLE_DEVICES=1 run hidden 2 2 "x" true); rc=$?
[ $rc = 77 ] && grep -q "this machine has 1" <<<"$out" || fail "CUDA_VISIBLE_DEVICES: rc=$rc, $out"

fake_gpus 0
out=$(run none 2 1 - true); rc=$?
[ $rc = 77 ] && grep -q "SKIP: no GPU on this machine" <<<"$out" || fail "no GPU: rc=$rc, $out"

out=$(bash "$here/gpu_summary.sh" "$ZINC_GPU_TEST_LOG"); rc=$?
echo "$out"
[ $rc = 0 ] || fail "summary with tests that ran: rc=$rc"
grep -q "^GPU tests: 5 ran, 4 skipped$" <<<"$out" || fail "summary counts"
grep -q "  1 skipped: needs 2 distinct GPUs (ranks on two GPUs); this machine has 1" <<<"$out" ||
    fail "summary reasons"
grep -q "  2 ran with 2 ranks on 1 GPU(s)" <<<"$out" || fail "summary of what ran"
# Nothing ran: skipped without a GPU, failed with one.
printf 'a\tskip\tno GPU on this machine\n' >"$tmp/none.log"
out=$(bash "$here/gpu_summary.sh" "$tmp/none.log"); rc=$?
if compgen -G "/dev/nvidia[0-9]*" >/dev/null; then
    [ $rc = 1 ] || fail "all skipped with a GPU present must fail: rc=$rc, $out"
else
    [ $rc = 77 ] || fail "all skipped without a GPU must skip: rc=$rc, $out"
fi
echo "gpu_run_check: passed"
