#!/bin/bash
# Build the baseline programs the bench scripts compare zinc against, from this directory's
# sources, into OUT_DIR: mpi_allreduce (Open MPI's mpicc) and gloo_allreduce (Debian's
# libgloo-dev). Installs the Debian packages first when run as root (scripts/deps.sh bench).
#   bench/baselines/build.sh OUT_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: bench/baselines/build.sh OUT_DIR}
"$here/../../scripts/deps.sh" bench >&2
mkdir -p "$out"
mpicc -O2 -Wall -o "$out/mpi_allreduce" "$here/mpi_allreduce.c"
g++ -O2 -Wall -std=c++17 -o "$out/gloo_allreduce" "$here/gloo_allreduce.cc" -lgloo -lpthread
