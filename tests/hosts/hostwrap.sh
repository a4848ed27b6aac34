#!/bin/sh
# Run a rank of a zinc-run job as a rank of "host" RANK / RANKS_PER_HOST: ranks with equal
# ZINC_HOSTID are one host to zinc (shm between them, the net transport to the others).
# NCCL_HOSTID gets the same value, so that real NCCL run through this wrapper (bench scripts,
# tests/gpu/nccl_plugin.sh) sees the same hosts.
h="host$((ZINC_RANK / RANKS_PER_HOST))"
exec env ZINC_HOSTID="$h" NCCL_HOSTID="$h" "$@"
