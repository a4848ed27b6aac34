#!/bin/bash
# Run a program with a 1 MB /dev/shm, in a private mount namespace (root only).
set -euo pipefail
if ! unshare -m true 2>/dev/null; then
    echo "SKIP: cannot create a mount namespace here (not root?)"
    exit 77
fi
exec unshare -m bash -c 'mount -t tmpfs -o size=1M,mode=1777 tmpfs /dev/shm && exec "$@"' zn "$@"
