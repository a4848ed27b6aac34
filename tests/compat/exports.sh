#!/bin/bash
# exports.sh REF_LIB ZINC_LIB: every dynamic symbol the reference libnccl.so.2 defines must be
# defined by zinc's libnccl.so.2 too, as a function (a program linked against NCCL would
# otherwise fail to load, or fail at its first call). Symbols zinc exports beyond the
# reference are listed, not failed: they must be zinc's own (zinc*).
# Exit 77 (skipped) when the reference library is not on this machine.
set -euo pipefail
ref=$1
zinc=$2
if [ ! -e "$ref" ]; then
    echo "exports: SKIP: no reference library at $ref"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# nm -D --defined-only: "ADDRESS TYPE NAME". Functions are T (text), W (weak) or i (ifunc).
nm -D --defined-only "$ref" | awk '{print $NF}' | sort -u >"$tmp/ref"
nm -D --defined-only "$zinc" | awk '{print $NF}' | sort -u >"$tmp/zinc"
nm -D --defined-only "$zinc" | awk '$2 ~ /^[TWi]$/ {print $NF}' | sort -u >"$tmp/zinc_fn"
nref=$(wc -l <"$tmp/ref")
if [ "$nref" -lt 50 ]; then
    echo "exports: FAIL: only $nref symbols read from $ref (is nm installed?)"
    exit 1
fi
missing=$(comm -23 "$tmp/ref" "$tmp/zinc")
not_fn=$(comm -12 "$tmp/ref" "$tmp/zinc" | comm -23 - "$tmp/zinc_fn")
extra=$(comm -13 "$tmp/ref" "$tmp/zinc")
bad=0
if [ -n "$missing" ]; then
    echo "exports: FAIL: $(echo "$missing" | wc -l) symbol(s) of $ref missing from $zinc:"
    echo "$missing" | sed 's/^/  /'
    bad=1
fi
if [ -n "$not_fn" ]; then
    echo "exports: FAIL: exported by zinc but not as functions:"
    echo "$not_fn" | sed 's/^/  /'
    bad=1
fi
# Every nccl* function has its pnccl* alias (NCCL's profiler interposition), except the
# internal reset hook, which NCCL exports without one too.
for s in $(grep '^nccl' "$tmp/zinc"); do
    [ "$s" = ncclResetDebugInitInternal ] && continue
    if ! grep -qx "p$s" "$tmp/zinc"; then
        echo "exports: FAIL: $s is exported without its alias p$s"
        bad=1
    fi
done
for s in ncclResetDebugInitInternal pncclResetDebugInit ncclResetDebugInit; do
    grep -qx "$s" "$tmp/zinc" || { echo "exports: FAIL: $s is not exported"; bad=1; }
done
if [ -n "$extra" ]; then
    echo "exports: zinc exports $(echo "$extra" | wc -l) symbol(s) beyond the reference:" $extra
    if grep -qv '^zinc' <<<"$extra"; then
        echo "exports: note: symbols without the zinc prefix leak from the library"
    fi
fi
[ $bad = 0 ] && echo "exports: ok: all $nref symbols of the reference are exported by zinc"
exit $bad
