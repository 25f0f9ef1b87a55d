#!/usr/bin/env bash
# Installs everything the lab and the test suite need on a fresh Debian 12 machine:
# podman (with runc: crun refuses this kernel's cgroup v1 hybrid mode), debootstrap for the
# local base images, and two Python virtualenvs: the newest supported ansible-core with molecule
# and the test tools, and the oldest supported ansible-core alone.
# Safe to run again: each step checks before it acts.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${BLACKWELL_VENV:-$root/.venv}

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

# ansible-core 2.20 and 2.21, the releases the collection supports, need Python 3.12 or newer on
# the controller, which Debian 12 does not ship. The first that really runs of:
# BLACKWELL_PYTHON312 (which must), python3.13/python3.12 on PATH, pyenv's by full path (its
# shims fail for versions that are not global). Without one, stop and say what to install.
is_python312() { [ -n "$1" ] && "$1" -c 'import sys; assert sys.version_info[:2] >= (3, 12)' 2>/dev/null; }
controller_python=
if [ -n "${BLACKWELL_PYTHON312:-}" ]; then
  is_python312 "$BLACKWELL_PYTHON312" || {
    echo "bootstrap: BLACKWELL_PYTHON312=$BLACKWELL_PYTHON312 is not a working Python 3.12 or newer" >&2
    exit 1
  }
  controller_python=$BLACKWELL_PYTHON312
else
  pyenv_root=$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")
  for candidate in "$(command -v python3.13 || true)" "$(command -v python3.12 || true)" \
    "$pyenv_root"/versions/3.13*/bin/python3.13 "$pyenv_root"/versions/3.12*/bin/python3.12; do
    if is_python312 "$candidate"; then
      controller_python=$candidate
      break
    fi
  done
fi
[ -n "$controller_python" ] || {
  echo "bootstrap: no Python 3.12 or newer found: ansible-core 2.20 and 2.21 need one on the" \
    "controller. Install one (apt install python3.13 on Debian 13, pyenv install 3.12) or set" \
    "BLACKWELL_PYTHON312 to its full path, then run tools/bootstrap.sh again." >&2
  exit 1
}

# make_venv DIR REQUIREMENTS [CONSTRAINTS]: a venv of controller_python with REQUIREMENTS
# installed, every package at its CONSTRAINTS pin where given; one on an older Python (a checkout
# from before 2.19's end of life) is made again, and one whose files changed is installed again.
make_venv() {
  local dir=$1 requirements=$2 constraints=${3:-} stamp want
  local pip=("$dir/bin/python" -m pip install -q --disable-pip-version-check)
  if [ -x "$dir/bin/python" ] && ! is_python312 "$dir/bin/python"; then
    rm -rf "$dir"
  fi
  [ -x "$dir/bin/python" ] || "$controller_python" -m venv "$dir"
  stamp=$dir/.requirements.sha256
  want=$(cat "$requirements" ${constraints:+"$constraints"} | sha256sum | cut -d' ' -f1)
  if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    "${pip[@]}" --upgrade pip
    "${pip[@]}" -r "$requirements" ${constraints:+-c "$constraints"}
    echo "$want" >"$stamp"
  fi
}
# The main venv: the newest supported ansible-core and every test and lab tool, each package at
# the version tools/constraints.txt pins.
make_venv "$venv" "$root/tools/requirements.txt" "$root/tools/constraints.txt"
# The oldest supported ansible-core (meta/runtime.yml), ansible-core alone, as a user's
# controller has it: sanity, the unit tests and the installed tarball's lab run use it.
floor_venv=${BLACKWELL_VENV_FLOOR:-$root/.venv-core220}
make_venv "$floor_venv" "$root/tools/requirements-core220.txt"

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
echo "bootstrap: ok ($venv, $floor_venv; $("$controller_python" -V))"
