#!/bin/bash
# run_compat.sh ZINC_RUN ZINC_LIBDIR PROGRAM NRANKS: run an NCCL program that was linked
# against the reference libnccl.so.2 on zinc's library instead, on host communicators.
#
# Before running it, check what makes the test meaningful: the program needs libnccl.so.2,
# has no RPATH/RUNPATH that would pin NVIDIA's copy, and with LD_LIBRARY_PATH set the loader
# resolves libnccl.so.2 into zinc's directory (the program itself checks zinc's symbols too).
# Exit 77 (skipped) if the program was not built (no reference NCCL on this machine).
set -euo pipefail
run=$1
libdir=$(cd "$2" && pwd -P)
prog=$3
n=$4
if [ ! -x "$prog" ]; then
    echo "run_compat: SKIP: $prog was not built (no reference NCCL header or library)"
    exit 77
fi
dyn=$(readelf -d "$prog")
if ! grep -q 'NEEDED.*\[libnccl\.so\.2\]' <<<"$dyn"; then
    echo "run_compat: FAIL: $prog does not need libnccl.so.2:"
    echo "$dyn" | grep NEEDED
    exit 1
fi
if grep -qE 'RPATH|RUNPATH' <<<"$dyn"; then
    echo "run_compat: FAIL: $prog has an RPATH/RUNPATH, which could pin the reference library:"
    echo "$dyn" | grep -E 'RPATH|RUNPATH'
    exit 1
fi
export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
resolved=$(ldd "$prog" | awk '$1 == "libnccl.so.2" {print $3}')
if [ -z "$resolved" ] || [ "$(dirname "$(readlink -f "$resolved")")" != "$libdir" ]; then
    echo "run_compat: FAIL: libnccl.so.2 resolves to '$resolved', not into $libdir"
    exit 1
fi
echo "run_compat: libnccl.so.2 -> $resolved"
export ZINC_DEVICE=host
exec "$run" -n "$n" --timeout 100 "$prog"
