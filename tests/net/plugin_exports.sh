#!/bin/bash
# net_plugin_exports: libnccl-net-zinc.so exports the ncclNetPlugin_v6..v12 tables and no other
# symbol (none of the NCCL API, which would shadow NCCL's own when NCCL loads the plugin).
# Usage: plugin_exports.sh LIBRARY
set -uo pipefail
got=$(nm -D --defined-only "$1" | awk '{print $3}' | sort | tr '\n' ' ')
want=$(printf 'ncclNetPlugin_v%s\n' 6 7 8 9 10 11 12 | sort | tr '\n' ' ')
echo "exported: $got"
[ "$got" = "$want" ] || { echo "expected exactly: $want"; exit 1; }
