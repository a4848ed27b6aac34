#!/bin/bash
# docs/configuration.md lists exactly the parameters of src/util/param_list.h, each with the
# same NCCL_ fallback name: a parameter added to the code without documentation, or a
# documented one that the code no longer reads, fails this test.
#   doc_params.sh PARAM_LIST_H CONFIGURATION_MD
set -euo pipefail
list=$1 doc=$2
# "ZINC_X NCCL_Y" or "ZINC_X -" per ZN_PARAM entry (name and fallback are on the entry's first line).
code=$(grep -E '^ZN_PARAM\(' "$list" |
    sed -E 's/^ZN_PARAM\([^,]*,[^,]*, *"([A-Z0-9_]+)", *("([A-Z0-9_]+)"|NULL).*/\1 \3/' |
    awk '{print $1, ($2 == "" ? "-" : $2)}' | sort)
# The table rows of the "## Parameters" section: | `ZINC_X` (`NCCL_Y`) | default | meaning |
docs=$(awk '/^## /{p = ($0 == "## Parameters")} p' "$doc" | grep -E '^\| `ZINC_' |
    sed -E 's/^\| `(ZINC_[A-Z0-9_]+)`( \(`(NCCL_[A-Z0-9_]+)`\))? \|.*/\1 \3/' |
    awk '{print $1, ($2 == "" ? "-" : $2)}' | sort)
[ -n "$code" ] || { echo "no ZN_PARAM entries found in $list"; exit 1; }
[ -n "$docs" ] || { echo "no parameter rows found under '## Parameters' in $doc"; exit 1; }
if [ "$code" != "$docs" ]; then
    echo "docs/configuration.md and src/util/param_list.h disagree (< code only, > docs only):"
    diff <(echo "$code") <(echo "$docs") | grep '^[<>]' || true
    exit 1
fi
echo "$(echo "$code" | wc -l) parameters documented"
