#!/bin/bash
# install_check.sh BUILD_DIR SRC_DIR: install zinc into a temporary prefix and build MSCCL++
# 0.1-style programs against it with -lmscclpp: msc_host_test.cc with the C++ compiler
# (pkg-config mscclpp) and run on 2 ranks, msc_shm_test.c with the C compiler, and the GPU
# program msc_gpu_test.cu with nvcc where there is one (built only: this may be a machine
# without a GPU).
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" || { cat "$tmp/install.log"; exit 1; }
for f in include/mscclpp.h include/mscclppfifo.h lib/libmscclpp.so lib/libmscclpp.so.0 \
         lib/pkgconfig/mscclpp.pc; do
    [ -e "$prefix/$f" ] || { echo "msc_install: FAIL: $f was not installed"; exit 1; }
done
if command -v pkg-config >/dev/null; then
    flags=$(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --cflags --libs mscclpp)
else
    flags="-I$prefix/include -L$prefix/lib -lmscclpp"
fi
echo "msc_install: flags $flags"
nocuda=""
[ -e /usr/local/cuda/include/cuda_runtime.h ] || nocuda=-DZINC_NO_CUDA_HEADERS
# shellcheck disable=SC2086
c++ -std=c++17 -Wall -Wextra -Werror $nocuda -o "$tmp/host" "$src/tests/mscclpp/msc_host_test.cc" \
    $flags -Wl,-rpath,"$prefix/lib"
# shellcheck disable=SC2086
cc -std=c11 -Wall -Wextra -Werror -D_GNU_SOURCE $nocuda -I"$src/src" -o "$tmp/c" \
    "$src/tests/mscclpp/msc_shm_test.c" $flags -Wl,-rpath,"$prefix/lib"
"$prefix/bin/zinc-run" -n 2 --timeout 100 "$tmp/host"
"$prefix/bin/zinc-run" -n 2 --timeout 100 "$tmp/c" pingpong
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
if [ -x "$nvcc" ]; then
    echo "msc_install: $nvcc"
    # shellcheck disable=SC2086
    "$nvcc" -std=c++17 -arch=sm_90 -o "$tmp/gpu" "$src/tests/mscclpp/msc_gpu_test.cu" $flags \
        -Xlinker -rpath -Xlinker "$prefix/lib"
else
    echo "msc_install: no nvcc here: the GPU program was not compiled"
fi
echo "msc_install: ok"
