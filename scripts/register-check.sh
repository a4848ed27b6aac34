#!/bin/bash
# Registered buffers on a GPU machine: the registration GPU tests (and gpu_comm_check), then
# all_reduce with -R 1 (ncclMemAlloc + ncclCommRegister) for zinc and NCCL, and zinc without
# registration, one process per GPU, in one sitting. Every step is bounded and writes straight
# into the folder for logs, $OUT (or ./gpu-out), so a step that runs out of time still leaves
# its log.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
out=${OUT:-$here/gpu-out}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 ZINC_TIMEOUT=${ZINC_TIMEOUT:-20}
timeout 200 bash -c "cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null && cmake --build build -j \$(nproc)" >"$out/build.log" 2>&1 || { tail -20 "$out/build.log"; exit 1; }
timeout "${CTEST_TIMEOUT:-240}" ctest --test-dir build -L gpu -R "${CTEST_FILTER:-register|gpu_comm_procs}" --timeout 90 --output-on-failure >"$out/ctest.log" 2>&1
grep -E "Test +#|tests passed|FAIL" "$out/ctest.log"
ngpu=$(nvidia-smi -L | grep -c '^GPU')
nccl_lib=$(python3 -c 'import nvidia.nccl as m, os; print(os.path.join(list(m.__path__)[0], "lib"))')
R=build/bin/zinc-run P=build/bin/zinc-perf
args=(all_reduce -b ${REG_MIN:-8} -e ${REG_MAX:-1G} -f 4 -n 20 -w 5 -c 1)
{
    echo "### NCCL -R 1"; LD_LIBRARY_PATH=$nccl_lib timeout 90 $R -n "$ngpu" $P "${args[@]}" -R 1
    echo "### zinc -R 1"; timeout 90 $R -n "$ngpu" $P "${args[@]}" -R 1
    echo "### zinc -R 1 ZINC_ALGO=zerocopy"; ZINC_ALGO=zerocopy timeout 90 $R -n "$ngpu" $P "${args[@]}" -R 1
    echo "### zinc"; timeout 90 $R -n "$ngpu" $P "${args[@]}"
} >"$out/reg.txt" 2>&1
ZINC_DEBUG=INFO timeout 30 $R -n "$ngpu" $P all_reduce -R 1 -b 4M -e 4M -n 1 -w 0 2>&1 | grep -E "TUNE|regist" | head -5 >>"$out/reg.txt"
grep -E "^###|^ +[0-9]|TUNE|Out of" "$out/reg.txt"
