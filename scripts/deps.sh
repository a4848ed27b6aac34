#!/bin/bash
# Install the Debian packages zinc's build and tests need, when run as root; otherwise say
# what is missing. Usage: scripts/deps.sh build|test|bench
set -euo pipefail
what=${1:-build}
need=()
have_cmd() { command -v "$1" >/dev/null 2>&1; }
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

have_cmd cmake || need+=(cmake)
have_cmd make || need+=(make)
have_cmd gcc || need+=(gcc)
have_cmd g++ || need+=(g++)
if [ "$what" = build ] || [ "$what" = test ]; then
    have_pkg libibverbs-dev || need+=(libibverbs-dev)   # verbs headers: the IB net and ibemu
fi
if [ "$what" = test ]; then
    have_cmd ip || need+=(iproute2)                  # multi-host tests in network namespaces
    have_cmd clang || need+=(clang)                  # libFuzzer targets
    have_pkg libclang-rt-14-dev || need+=(libclang-rt-14-dev)
    have_cmd clang-format || need+=(clang-format)    # format check
    have_cmd pkg-config || need+=(pkg-config)        # install test (pkg-config build)
fi
if [ "$what" = bench ]; then
    have_cmd mpicc || need+=(openmpi-bin libopenmpi-dev)
    have_cmd iperf3 || need+=(iperf3)                # bench/net-vs-iperf.sh
    echo '#include <gloo/allreduce_ring.h>' | g++ -x c++ -E - >/dev/null 2>&1 || need+=(libgloo-dev)
fi
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
    echo "zinc: missing Debian packages: ${need[*]} (run as root, or: sudo apt-get install -y ${need[*]})" >&2
    exit 1
fi
echo "zinc: installing Debian packages: ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
echo "zinc: installed ${need[*]}"
