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

# A second controller on the newest ansible-core the collection supports (meta/runtime.yml
# names the oldest; the main venv runs that one). 2.20 and later need Python 3.12, which
# Debian 12 does not ship: BLACKWELL_PYTHON312, else pyenv's 3.12 by full path (its shims fail
# for versions that are not global), else a python3.12 on PATH that really runs. Without one the
# tests that need this venv fail and say what to install; the rest of the suite still runs.
core221_venv=${BLACKWELL_VENV_CORE221:-$root/.venv-core221}
is_python312() { [ -n "$1" ] && "$1" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null; }
core221_python=
if [ -n "${BLACKWELL_PYTHON312:-}" ]; then
  is_python312 "$BLACKWELL_PYTHON312" || {
    echo "bootstrap: BLACKWELL_PYTHON312=$BLACKWELL_PYTHON312 is not a working Python 3.12" >&2
    exit 1
  }
  core221_python=$BLACKWELL_PYTHON312
else
  for candidate in "$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")"/versions/3.12*/bin/python3.12 \
    "$(command -v python3.12 || true)"; do
    if is_python312 "$candidate"; then
      core221_python=$candidate
      break
    fi
  done
fi
if [ -x "$core221_venv/bin/python" ] || [ -n "$core221_python" ]; then
  if [ ! -x "$core221_venv/bin/python" ]; then
    "$core221_python" -m venv "$core221_venv"
  fi
  stamp=$core221_venv/.requirements.sha256
  want=$(sha256sum "$root/tools/requirements-core221.txt" | cut -d' ' -f1)
  if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    "$core221_venv/bin/python" -m pip install -q -r "$root/tools/requirements-core221.txt"
    echo "$want" >"$stamp"
  fi
else
  echo "bootstrap: no Python 3.12 found, $core221_venv not created (install Python 3.12 or set" \
    "BLACKWELL_PYTHON312 to one; the ansible-core 2.21 tests need it)" >&2
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
if [ -x "$core221_venv/bin/python" ]; then
  echo "bootstrap: ok ($venv, $core221_venv)"
else
  echo "bootstrap: ok ($venv)"
fi
