#!/bin/sh
# devapi_layout: zinc's device API headers have NCCL 2.30.7's layouts, and zinc reads NCCL
# 2.28.9's. Usage: layout.sh FACTS_2_30_7 ZINC_PROGRAM REF_2_28_9_PROGRAM ZINC_V22809_PROGRAM
#   1. ZINC_PROGRAM (layout_test.cc on zinc's headers) prints exactly FACTS_2_30_7 (its lines
#      that are not comments), the facts recorded from NCCL 2.30.7's header.
#   2. Where the CUDA toolkit's NCCL 2.28.9 header exists (REF_2_28_9_PROGRAM is a program):
#      it prints what ZINC_V22809_PROGRAM prints, the unchanged structs from zinc's headers and
#      the changed ones from zinc's copies of their 2.28.9 layouts.
set -eu
facts=$1 zinc=$2 ref28=$3 zinc28=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
grep -v '^#' "$facts" >"$tmp/want"
"$zinc" >"$tmp/zinc"
if ! cmp -s "$tmp/want" "$tmp/zinc"; then
    echo "zinc's headers differ from NCCL 2.30.7's layout facts (< NCCL 2.30.7, > zinc):"
    diff "$tmp/want" "$tmp/zinc" || true
    exit 1
fi
echo "$(wc -l <"$tmp/zinc") layout facts identical to NCCL 2.30.7's"
if [ ! -x "$ref28" ]; then
    echo "no reference NCCL 2.28.9 nccl_device.h: its layouts not compared"
    exit 0
fi
"$ref28" >"$tmp/ref28"
"$zinc28" >"$tmp/zinc28"
if ! cmp -s "$tmp/ref28" "$tmp/zinc28"; then
    echo "zinc differs from the reference NCCL 2.28.9 layouts (< reference, > zinc):"
    diff "$tmp/ref28" "$tmp/zinc28" || true
    exit 1
fi
echo "$(wc -l <"$tmp/zinc28") layout facts identical to the reference NCCL 2.28.9's"
