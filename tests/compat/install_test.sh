#!/bin/bash
# install_test.sh BUILD_DIR SRC_DIR: make install into a temporary prefix, check the tree, then
# build a small program against it as an outside project would, with pkg-config and with
# find_package(zinc), and run each on 1 and 2 ranks with the installed zinc-run.
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
export ZINC_DEVICE=host

echo "install_test: cmake --install $build --prefix $prefix"
cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" || { cat "$tmp/install.log"; exit 1; }
bad=0
for f in include/nccl.h include/zinc.h lib/libnccl.so lib/libnccl.so.2 lib/libnccl_static.a \
         lib/libnccl-net-zinc.so bin/zinc-run bin/zinc-perf bin/zinc-info lib/pkgconfig/nccl.pc lib/pkgconfig/zinc.pc \
         lib/cmake/zinc/zincConfig.cmake lib/cmake/zinc/zincConfigVersion.cmake; do
    [ -e "$prefix/$f" ] || { echo "install_test: FAIL: $f was not installed"; bad=1; }
done
[ $bad = 0 ] || exit 1
soname=$(readelf -d "$prefix/lib/libnccl.so.2" | sed -n 's/.*SONAME.*\[\(.*\)\].*/\1/p')
[ "$soname" = libnccl.so.2 ] || { echo "install_test: FAIL: soname '$soname'"; exit 1; }
# The installed tools find the installed library, not another libnccl.so.2 on the system.
lib_of_perf=$(ldd "$prefix/bin/zinc-perf" | awk '$1 == "libnccl.so.2" {print $3}')
case "$(readlink -f "$lib_of_perf")" in
"$(readlink -f "$prefix")"/lib/*) ;;
*) echo "install_test: FAIL: installed zinc-perf loads '$lib_of_perf'"; exit 1 ;;
esac

run() { # run NAME PROGRAM: 1 and 2 ranks
    for n in 1 2; do
        echo "install_test: $1 on $n rank(s)"
        "$prefix/bin/zinc-run" -n "$n" --timeout 60 "$2" "$prefix/lib" || {
            echo "install_test: FAIL: $1 on $n rank(s)"; exit 1; }
    done
}

# pkg-config, as a Makefile would use it.
if command -v pkg-config >/dev/null; then
    export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
    flags=$(pkg-config --cflags --libs nccl)
    echo "install_test: pkg-config --cflags --libs nccl: $flags"
    [ "$(pkg-config --modversion nccl)" = 2.30.7 ] || { echo "install_test: FAIL: nccl.pc version"; exit 1; }
    [ -n "$(pkg-config --modversion zinc)" ] || { echo "install_test: FAIL: zinc.pc"; exit 1; }
    # shellcheck disable=SC2086
    cc -o "$tmp/hello_pc" "$src/tests/compat/install_project/hello.c" $flags -ldl \
        -Wl,-rpath,"$(pkg-config --variable=libdir nccl)"
    run "pkg-config build" "$tmp/hello_pc"
else
    echo "install_test: FAIL: pkg-config is not installed (apt-get install pkg-config)"
    exit 1
fi

# CMake, as a project using find_package would.
cmake -S "$src/tests/compat/install_project" -B "$tmp/proj" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_BUILD_RPATH="$prefix/lib" >"$tmp/proj.log" || { cat "$tmp/proj.log"; exit 1; }
grep "zinc found" "$tmp/proj.log" || true
cmake --build "$tmp/proj" >"$tmp/build.log" 2>&1 || { cat "$tmp/build.log"; exit 1; }
run "find_package build" "$tmp/proj/hello_cmake"
run "find_package static build" "$tmp/proj/hello_cmake_static"

# The tree is relocatable: move it and build again with pkg-config.
mv "$prefix" "$tmp/moved"
prefix=$tmp/moved
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
# shellcheck disable=SC2086
cc -o "$tmp/hello_moved" "$src/tests/compat/install_project/hello.c" \
    $(pkg-config --cflags --libs nccl) -ldl -Wl,-rpath,"$prefix/lib"
run "pkg-config build after moving the installation" "$tmp/hello_moved"
echo "install_test: ok"
