#!/bin/sh
# devapi_nccl_tests: every src/*.cu of an nccl-tests checkout compiles against zinc's headers,
# not NVIDIA's. nccl-tests 2.19.6 takes its NCCL >= 2.29 path with zinc's 2.30 headers: the
# requirements initializer, ginConnectionType, ncclCommQueryProperties. Skips (77) without a
# checkout.
# Usage: nccl_tests.sh NVCC ARCH ZINC_INCLUDE NCCL_TESTS_DIR
set -eu
nvcc=$1 arch=$2 inc=$3 src=${4:-}
if [ -z "$src" ] || [ ! -f "$src/src/common.h" ]; then
    echo "SKIP: no nccl-tests checkout (configure with -DZINC_NCCL_TESTS_DIR=<path>)"
    exit 77
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
n=0
for f in "$src"/src/*.cu; do
    # zinc's include directory first: the CUDA toolkit's holds NVIDIA's nccl.h too.
    "$nvcc" -std=c++17 -arch="sm_$arch" --extended-lambda -DNCCL_OS_LINUX -I"$inc" \
        -I"$src/os" -I"$src/src" -c "$f" -o "$out/$(basename "$f").o"
    n=$((n + 1))
done
echo "$n nccl-tests sources compiled against $inc"
