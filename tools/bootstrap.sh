#!/usr/bin/env bash
# Installs everything the lab and the test suite need on a fresh Debian 12 machine:
# podman (with runc: crun refuses this kernel's cgroup v1 hybrid mode), debootstrap for the
# local base images, and a Python virtualenv with Ansible, molecule and the test tools.
# Safe to run again: each step checks before it acts.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${BLACKWELL_VENV:-$root/.venv}
python=${BLACKWELL_PYTHON:-python3}

need_apt=()
for pkg in podman runc debootstrap uidmap slirp4netns dpkg-dev apt-utils gnupg openssh-client rsync; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || need_apt+=("$pkg")
done
if ((${#need_apt[@]})); then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

conf=/etc/containers/containers.conf
if ! grep -qs '^runtime *= *"runc"' "$conf"; then
  mkdir -p /etc/containers
  printf '[engine]\nruntime = "runc"\n' >"$conf"
fi

if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
fi
stamp=$venv/.requirements.sha256
want=$(sha256sum "$root/tools/requirements.txt" | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  "$venv/bin/python" -m pip install -q --upgrade pip
  "$venv/bin/python" -m pip install -q -r "$root/tools/requirements.txt"
  echo "$want" >"$stamp"
fi

# ansible-test bootstraps pip in its sanity venvs from a download host this network cannot
# reach; a stand-in at the cache path it reads does the same job with ensurepip.
for ver in 24_2 25_2; do
  stand_in=$HOME/.ansible/test/cache/get_pip_${ver}.py
  [ -f "$stand_in" ] && continue
  mkdir -p "$(dirname "$stand_in")"
  cat >"$stand_in" <<'PY'
"""Offline stand-in for get-pip.py: ensurepip, then pip install with the given arguments."""
import subprocess
import sys

args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
subprocess.run([sys.executable, "-m", "ensurepip", "--upgrade"], check=True)
if args:
    subprocess.run([sys.executable, "-m", "pip", "install"] + args, check=True)
PY
done
echo "bootstrap: ok ($venv)"
