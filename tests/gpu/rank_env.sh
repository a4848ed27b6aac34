#!/bin/sh
# Run a rank of a zinc-run job with one more environment setting when it is rank RANK: for tests
# of ranks that disagree on a setting.
# Usage: rank_env.sh RANK NAME=VALUE COMMAND ARGS...
r=$1 kv=$2
shift 2
if [ "$ZINC_RANK" = "$r" ]; then exec env "$kv" "$@"; fi
exec "$@"
