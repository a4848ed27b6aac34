#!/bin/sh
# Run a rank of a zinc-run job as a rank of "host" RANK / RANKS_PER_HOST: ranks with equal
# ZINC_HOSTID are one host to zinc (shm between them, the net transport to the others).
exec env ZINC_HOSTID="host$((ZINC_RANK / RANKS_PER_HOST))" "$@"
