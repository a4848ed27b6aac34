#!/bin/bash
# The test suite: every test of the normal build, then the tests labelled "san" in an
# AddressSanitizer + UndefinedBehaviorSanitizer build. Prints how long each part took.
set -euo pipefail
build=${1:-build}; san=${2:-build-san}
jobs=$(nproc)
t0=$(date +%s)
ctest --test-dir "$build" --output-on-failure --timeout 600
t1=$(date +%s)
echo "zinc: test suite passed in $((t1 - t0)) s"
cmake -S . -B "$san" -DCMAKE_BUILD_TYPE=Debug -DZINC_SANITIZE=ON -DZINC_ENABLE_CUDA=OFF >/dev/null
cmake --build "$san" -j "$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir "$san" --output-on-failure -L san --timeout 600
t2=$(date +%s)
echo "zinc: sanitizer build and tests passed in $((t2 - t1)) s (total $((t2 - t0)) s)"
