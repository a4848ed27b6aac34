#!/bin/bash
# exports_api.sh NAMES ZINC_LIB: every function NCCL 2.30.7's nccl.h declares (NAMES: the
# ZA_FUNCTION(name) lines tests/abi stores for it) is exported by zinc's libnccl.so.2 as a
# function. A program built against that header would otherwise fail to load with
# "undefined symbol", as PyTorch built against NCCL 2.29+ does with a 2.28 library.
set -euo pipefail
names=$1
zinc=$2
want=$(sed -n 's/^ZA_FUNCTION(\([A-Za-z0-9_]*\))$/\1/p' "$names" | sort -u)
n=$(echo "$want" | grep -c . || true)
if [ "$n" -lt 100 ]; then
    echo "exports_api: FAIL: only $n function names read from $names"
    exit 1
fi
have=$(nm -D --defined-only "$zinc" | awk '$2 ~ /^[TWi]$/ {print $NF}' | sort -u)
missing=$(comm -23 <(echo "$want") <(echo "$have"))
if [ -n "$missing" ]; then
    echo "exports_api: FAIL: $(echo "$missing" | wc -l) of the $n functions of NCCL 2.30.7's nccl.h are not exported by $zinc:"
    echo "$missing" | sed 's/^/  /'
    exit 1
fi
echo "exports_api: ok: all $n functions of NCCL 2.30.7's nccl.h are exported"
