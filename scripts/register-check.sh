#!/bin/bash
# Registered buffers on a GPU machine: the registration GPU tests (and gpu_comm_check), then
# all_reduce with -R 1 (ncclMemAlloc + ncclCommRegister) for zinc and NCCL, and zinc without
# registration, one process per GPU, in one sitting. Output in $OUT (or ./gpu-out): reg.txt.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
CTEST_FILTER=${CTEST_FILTER:-'register|gpu_comm_procs|gpu_all_reduce_procs_n2'} scripts/gpu-check.sh tests
out=${OUT:-$here/gpu-out}/reg.txt
ngpu=$(nvidia-smi -L | grep -c '^GPU')
nccl_lib=$(python3 -c 'import nvidia.nccl as m, os; print(os.path.join(list(m.__path__)[0], "lib"))')
R=build/bin/zinc-run P=build/bin/zinc-perf
export NCCL_NVLS_ENABLE=0
args=(all_reduce -b 256K -e 1G -f 4 -n 20 -w 5 -c 1)
{
    echo "### NCCL -R 1"; LD_LIBRARY_PATH=$nccl_lib timeout 100 $R -n "$ngpu" $P "${args[@]}" -R 1
    echo "### zinc -R 1"; timeout 100 $R -n "$ngpu" $P "${args[@]}" -R 1
    echo "### zinc"; timeout 100 $R -n "$ngpu" $P "${args[@]}"
} >>"$out" 2>&1
ZINC_DEBUG=INFO timeout 60 $R -n "$ngpu" $P all_reduce -R 1 -b 4M -e 4M -n 1 -w 0 2>&1 | grep -E "TUNE|zero-copy|regist" | head -5 >>"$out"
grep -E "^#|^ +[0-9]|TUNE" "$out" | grep -v "^# *$" | head -120
