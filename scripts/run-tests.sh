#!/bin/bash
# The test suite: every test of the normal build, then the tests labelled "san" in an
# AddressSanitizer + UndefinedBehaviorSanitizer build, then a Release build with clang that is
# built (tests included) but not run: -O3 and the other compiler show warnings the tested
# builds do not. Warnings are errors in both extra builds. Prints how long each part took.
# Usage: scripts/run-tests.sh [BUILD [SANBUILD [RELBUILD]]]
set -euo pipefail
build=${1:-build}; san=${2:-build-san}; rel=${3:-build-release}
jobs=$(nproc)
t0=$(date +%s)
ctest --test-dir "$build" --output-on-failure --timeout 600
t1=$(date +%s)
echo "zinc: test suite passed in $((t1 - t0)) s"
cmake -S . -B "$san" -DCMAKE_BUILD_TYPE=Debug -DZINC_SANITIZE=ON -DZINC_ENABLE_CUDA=OFF \
    -DZINC_WERROR=ON >/dev/null
cmake --build "$san" -j "$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir "$san" --output-on-failure -L san --timeout 600
t2=$(date +%s)
echo "zinc: sanitizer build and tests passed in $((t2 - t1)) s"
# No CUDA: nvcc's time would buy nothing here (the device code is built by the first build).
CC=clang CXX=clang++ cmake -S . -B "$rel" -DCMAKE_BUILD_TYPE=Release -DZINC_ENABLE_CUDA=OFF \
    -DZINC_BUILD_TESTS=ON -DZINC_WERROR=ON >/dev/null
cmake --build "$rel" -j "$jobs" >/dev/null
t3=$(date +%s)
echo "zinc: Release build (clang, tests built, not run) passed in $((t3 - t2)) s"
echo "zinc: all passed in $((t3 - t0)) s"
