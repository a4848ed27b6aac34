#!/bin/bash
# Run a GPU test, or skip it (exit 77) on a machine without enough GPUs.
# Usage: gpu_run.sh NGPUS COMMAND ARGS...
set -euo pipefail
need=$1; shift
have=0
if command -v nvidia-smi >/dev/null 2>&1; then
    have=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
fi
if [ "$have" -lt "$need" ]; then
    echo "SKIP: needs $need GPU(s), this machine has $have"
    exit 77
fi
export NCCL_NVLS_ENABLE=0
exec "$@"
