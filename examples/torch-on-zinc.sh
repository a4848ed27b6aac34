#!/bin/bash
# Run examples/torch_nccl.py on NGPUS GPUs (one process each) through zinc's libnccl.so.2,
# preloaded so that PyTorch's RPATH to its own NCCL is not followed. With --nccl, the same
# script runs on PyTorch's own NCCL for comparison.
#   examples/torch-on-zinc.sh [NGPUS=4] [--nccl]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
n=${1:-4}
export NCCL_NVLS_ENABLE=0
if [ "${2:-}" = --nccl ]; then
    exec python3 -m torch.distributed.run --nproc-per-node "$n" "$here/examples/torch_nccl.py"
fi
lib=${ZINC_LIB:-$here/build/lib/libnccl.so.2}
[ -f "$lib" ] || { echo "no $lib: run make first" >&2; exit 2; }
export LD_PRELOAD=$lib${LD_PRELOAD:+:$LD_PRELOAD}
export REQUIRE_ZINC=1 ZINC_DEBUG=${ZINC_DEBUG:-VERSION}
exec python3 -m torch.distributed.run --nproc-per-node "$n" "$here/examples/torch_nccl.py"
