#!/usr/bin/env bash
# The key the molecule scenarios reach their nodes with: each node mounts the public half as the
# authorized_keys of the image's sudo user `debian` (what cloud-init does with the key a cloud
# user is given), and Ansible logs in over SSH as on a real fleet (.config/molecule/config.yml).
# Made once, in a directory only the caller can read; prints the private key's path. Every
# scenario's dependency step runs it, several at once.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dir=$root/.cache/lab/scenario-ssh
mkdir -p "$dir"
chmod 0700 "$dir"
exec 9>"$dir/.lock"
flock 9
if [ ! -f "$dir/id_ed25519" ]; then
  ssh-keygen -q -t ed25519 -N '' -C blackwell-sglang-scenarios -f "$dir/id_ed25519"
fi
echo "$dir/id_ed25519"
