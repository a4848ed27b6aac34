#!/bin/bash
# Run examples/torch_nccl.py on NGPUS GPUs (one process each) through zinc's libnccl.so.2,
# preloaded so that the NCCL symbols PyTorch binds to are zinc's (PyTorch's RPATH to its own
# NCCL is not followed for a soname already loaded, and preloaded definitions come first).
# Afterwards it counts, from zinc's own INIT log, the communicators zinc created per process.
# With --nccl, the same script runs on PyTorch's own NCCL for comparison.
#   examples/torch-on-zinc.sh [NGPUS=4] [--nccl]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
n=${1:-4}
export NCCL_NVLS_ENABLE=0 TORCH_NCCL_SHOW_EAGER_INIT_P2P_SERIALIZATION_WARNING=false
if [ "${2:-}" = --nccl ]; then
    exec python3 -m torch.distributed.run --nproc-per-node "$n" "$here/examples/torch_nccl.py"
fi
lib=${ZINC_LIB:-$here/build/lib/libnccl.so.2}
[ -f "$lib" ] || { echo "no $lib: run make first" >&2; exit 2; }
logs=$(mktemp -d)
export LD_PRELOAD=$lib${LD_PRELOAD:+:$LD_PRELOAD}
export REQUIRE_ZINC=1 ZINC_DEBUG=${ZINC_DEBUG:-INFO} ZINC_DEBUG_SUBSYS=${ZINC_DEBUG_SUBSYS:-INIT}
export ZINC_DEBUG_FILE=$logs/zinc.%p.log
rc=0
python3 -m torch.distributed.run --nproc-per-node "$n" "$here/examples/torch_nccl.py" || rc=$?
for f in "$logs"/zinc.*.log; do
    [ -f "$f" ] || { echo "zinc wrote no log: it was not used"; rc=1; break; }
    echo "$(basename "$f" .log): $(head -1 "$f" | sed 's/.*INIT //'); communicators created by zinc:" \
        "$(grep -c 'ready in' "$f") ($(grep -c 'split of comm' "$f") by ncclCommSplit)"
done
rm -rf "$logs"
exit $rc
