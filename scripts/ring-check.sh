#!/bin/bash
# Ring kernels on a GPU machine: the ring GPU tests, then all_reduce / all_gather time with the
# default algorithms, forced ring (ZINC_ALGO=ring), ring mode (ZINC_P2P_TOPO=ring) and NCCL, one
# process per GPU, in one sitting. Output in the folder for logs, $OUT (or ./gpu-out):
# ring.txt, plus gpu-check's.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
CTEST_FILTER=${CTEST_FILTER:-ring} scripts/gpu-check.sh tests
out=${OUT:-$here/gpu-out}/ring.txt
ngpu=$(nvidia-smi -L | grep -c '^GPU')
nccl_lib=$(python3 -c 'import nvidia.nccl as m, os; print(os.path.join(list(m.__path__)[0], "lib"))')
R=build/bin/zinc-run P=build/bin/zinc-perf
export NCCL_NVLS_ENABLE=0
for coll in all_reduce all_gather; do
    args=($coll -b 8 -e 1G -f 8 -n 20 -w 5 -c 0)
    {
        echo "### $coll NCCL"; LD_LIBRARY_PATH=$nccl_lib timeout 120 $R -n "$ngpu" $P "${args[@]}"
        echo "### $coll zinc default"; timeout 120 $R -n "$ngpu" $P "${args[@]}"
        echo "### $coll zinc ZINC_ALGO=ring"; ZINC_ALGO=ring timeout 120 $R -n "$ngpu" $P "${args[@]}"
        echo "### $coll zinc ZINC_P2P_TOPO=ring"; ZINC_P2P_TOPO=ring timeout 120 $R -n "$ngpu" $P "${args[@]}"
    } >>"$out" 2>&1
done
ZINC_DEBUG=INFO ZINC_P2P_TOPO=ring timeout 60 $R -n "$ngpu" $P all_reduce -b 1M -e 1M -n 1 -w 0 2>&1 | grep -E "GPU ring|peers mapped" >>"$out"
grep -E "^#|^ +[0-9]" "$out" | head -200
