#!/usr/bin/env bash
# Prints a directory usable as ANSIBLE_COLLECTIONS_PATH in which blackwell.sglang resolves to
# this checkout (ansible_collections/blackwell/sglang -> repository root). It lives outside the
# checkout so that no tool walking the tree follows the link back into it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd -P)
base=${TMPDIR:-/tmp}/blackwell-sglang-collections/$(printf '%s' "$root" | sha256sum | cut -c1-12)
mkdir -p "$base/ansible_collections/blackwell"
link=$base/ansible_collections/blackwell/sglang
if [ "$(readlink "$link" 2>/dev/null)" != "$root" ]; then
  ln -sfn "$root" "$link"
fi
echo "$base"
