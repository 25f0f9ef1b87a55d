#!/usr/bin/env bash
# Prints a directory usable as ANSIBLE_COLLECTIONS_PATH in which blackwell.sglang resolves to
# this checkout (ansible_collections/blackwell/sglang -> repository root). It lives outside the
# checkout so that no tool walking the tree follows the link back into it.
#
# Whatever resolves there is executed by the caller (often root), so the link lives in a
# directory only the caller can write: $XDG_RUNTIME_DIR when the session has one, else the
# caller's cache directory ($XDG_CACHE_HOME, or .cache in the home directory the password
# database gives the caller, not $HOME, which sudo may keep from another user), never a name
# others could take first in a shared /tmp. That parent must belong to the caller and be
# writable by no one else, and the directory in it must be a real directory, owned by the
# caller, with mode 0700; anything else (another user's directory, a link) is refused.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd -P)
uid=$(id -u)
home=$(getent passwd "$uid" | cut -d: -f6)
parent=${XDG_RUNTIME_DIR:-${XDG_CACHE_HOME:-${home:?collection-path: user $uid has no home directory}/.cache}}
mkdir -p -m 0700 "$parent"
if [ -L "$parent" ] || [ "$(stat -c %u "$parent")" != "$uid" ] || [ -n "$(find "$parent" -maxdepth 0 -perm /022)" ]; then
  echo "collection-path: $parent does not belong to user $uid alone; refusing to use it" >&2
  exit 1
fi
private=$parent/blackwell-sglang-$uid
mkdir -m 0700 "$private" 2>/dev/null || true
if [ -L "$private" ] || [ ! -d "$private" ] || [ "$(stat -c '%u %a' "$private")" != "$uid 700" ]; then
  echo "collection-path: $private is not a directory of user $uid with mode 0700; refusing to use it" >&2
  exit 1
fi
base=$private/collections-$(printf '%s' "$root" | sha256sum | cut -c1-12)
mkdir -p "$base/ansible_collections/blackwell"
link=$base/ansible_collections/blackwell/sglang
if [ "$(readlink "$link" 2>/dev/null)" != "$root" ]; then
  ln -sfn "$root" "$link"
fi
echo "$base"
