#!/bin/sh
# Regenerate layout_nccl_2.30.7.txt, the layout facts of NCCL 2.30.7's device API that
# devapi_layout checks zinc's headers against: layout_test.cc built against NCCL's headers.
#
#   sh tests/devapi/layout_regen.sh DIR... > tests/devapi/layout_nccl_2.30.7.txt
#
# DIR...: include directories holding NCCL 2.30.7's nccl.h and nccl_device.h (in NCCL's source
# tree nccl.h is generated from src/nccl.h.in, so that is two directories: the one with the
# generated nccl.h first, then src/include). CUDA's include directory (CUDA_INC, default
# /usr/local/cuda/include, which holds an older nccl.h) is searched after them.
set -eu
[ $# -ge 1 ] || { echo "usage: $0 NCCL_INCLUDE_DIR..." >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
cxx=${CXX:-c++}
cuda=${CUDA_INC:-/usr/local/cuda/include}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
incs=
for d in "$@"; do incs="$incs -I$d"; done
# shellcheck disable=SC2086
"$cxx" -std=c++17 $incs -isystem "$cuda" "$here/layout_test.cc" -o "$out/layout"
version=$("$out/layout" | awk '$2 == "reqs.version" { print $4 }')
echo "# Layout facts of NCCL's device API headers, printed by layout_test.cc built against"
echo "# them (layout_regen.sh): sizes, offsets, enum and macro values, initializer contents."
echo "# NCCL_VERSION_CODE of those headers: $version"
"$out/layout"
