#!/bin/bash
# Check the one-way layering of docs/architecture.md: abi <- util <- bootstrap <- net <- transport <- topo <- proxy
# <- algo <- exec <- api <- mscclpp (libmscclpp.so's own code). A file may include headers of its own layer and of layers below it, never
# above. abi (plain C structs and layout arithmetic shared with CUDA) is the ground floor, and
# the device code (src/device, compiled by nvcc) may include only abi and its own files, because
# everything else is host code.
# topo (what reaches what) sits above transport: it decides from the peer info the transport
# layer defines and exchanges, and the transports never ask it -- api/setup.c computes the
# topology and hands each transport its result (the arenas to map, the ring). It sits below
# proxy because the proxy's GPU net engine asks it which NIC a GPU uses and whether GPUDirect
# RDMA applies.
set -euo pipefail
src=$1
order=(abi util bootstrap net transport topo proxy algo exec api mscclpp)
level() { local i; for i in "${!order[@]}"; do [ "${order[$i]}" = "$1" ] && { echo "$i"; return; }; done; echo -1; }
bad=0
nfiles=0
for f in $(cd "$src" && ls */*.[ch] */*.cu */*.cuh 2>/dev/null); do
    nfiles=$((nfiles + 1))
    layer=${f%%/*}
    while read -r inc; do
        other=${inc%%/*}
        if [ "$layer" = device ]; then
            if [ "$other" != abi ] && [ "$other" != device ]; then
                echo "layering: src/$f (device) includes $inc (device code includes only abi)"
                bad=1
            fi
            continue
        fi
        if [ "$other" = device ]; then
            echo "layering: src/$f ($layer) includes $inc (host code never includes device code)"
            bad=1
            continue
        fi
        mine=$(level "$layer")
        theirs=$(level "$other")
        [ "$theirs" -lt 0 ] && continue
        if [ "$mine" -lt 0 ]; then
            echo "layering: src/$f is in src/$layer, which is no known layer"
            bad=1
        elif [ "$theirs" -gt "$mine" ]; then
            echo "layering: src/$f ($layer) includes $inc ($other is above $layer)"
            bad=1
        fi
    done < <(grep -oE '^#include "[a-z]+/[^"]+"' "$src/$f" | sed 's/#include "//; s/"$//')
done
[ $bad = 0 ] && echo "layering: ok ($nfiles files)"
exit $bad
