#!/bin/sh
# devapi_layout: the layouts printed by layout_test.cc built against the reference headers and
# against zinc's must be identical. Usage: layout.sh REF_PROGRAM ZINC_PROGRAM
set -eu
[ -x "$1" ] || { echo "SKIP: no reference nccl_device.h to compare with"; exit 77; }
ref=$("$1")
zinc=$("$2")
if [ "$ref" != "$zinc" ]; then
    echo "layouts differ (< reference, > zinc):"
    printf '%s\n' "$ref" >/tmp/devapi_layout_ref.$$
    printf '%s\n' "$zinc" | diff /tmp/devapi_layout_ref.$$ - || true
    rm -f /tmp/devapi_layout_ref.$$
    exit 1
fi
echo "$(printf '%s\n' "$zinc" | wc -l) layout facts identical"
