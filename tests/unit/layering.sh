#!/bin/bash
# Check DESIGN.md's one-way layering: util <- bootstrap <- transport <- proxy <- algo <- exec
# <- api <- mscclpp (device sits beside exec; mscclpp is libmscclpp.so's own code). A file may
# include headers of its own layer and of layers below it, never above.
set -euo pipefail
src=$1
order=(util bootstrap transport proxy algo device exec api mscclpp)
level() { local i; for i in "${!order[@]}"; do [ "${order[$i]}" = "$1" ] && { echo "$i"; return; }; done; echo -1; }
bad=0
for f in $(cd "$src" && ls */*.[ch] */*.cu */*.cuh 2>/dev/null); do
    layer=${f%%/*}
    mine=$(level "$layer")
    while read -r inc; do
        other=${inc%%/*}
        theirs=$(level "$other")
        [ "$theirs" -lt 0 ] && continue
        if [ "$theirs" -gt "$mine" ]; then
            echo "layering: src/$f ($layer) includes $inc ($other is above $layer)"
            bad=1
        fi
    done < <(grep -oE '^#include "[a-z]+/[^"]+"' "$src/$f" | sed 's/#include "//; s/"$//')
done
[ $bad = 0 ] && echo "layering: ok ($(cd "$src" && ls */*.[ch] | wc -l) files)"
exit $bad
