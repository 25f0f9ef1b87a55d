#!/usr/bin/env bash
# Prints the path of the real SGLang wheel of a release, downloading it from PyPI (no
# dependencies) into the repository's .cache/wheels the first time. The wheel is for the
# CPython 3.11 / manylinux_2_34 x86_64 interpreter of the lab image (Debian 12): newer releases
# are platform wheels.
#
#   tools/lab/sglang-wheel.sh 0.5.23
set -euo pipefail
version=${1:?usage: sglang-wheel.sh VERSION}
root=$(cd "$(dirname "$0")/../.." && pwd)
dest=${BLACKWELL_CACHE:-$root/.cache}/wheels
python=${BLACKWELL_VENV:-$root/.venv}/bin/python
[ -x "$python" ] || python=python3
# The wheels here are unpacked and installed by the tests and the lab, often as root.
# shellcheck source=tools/lab/owned-dir.sh
. "$root/tools/lab/owned-dir.sh"
owned_dir "$dest"
lock_script "$dest/.lock" "$@"
find_wheel() {
  find "$dest" -maxdepth 1 -name "sglang-$version-*.whl" \( -name '*-py3-none-any.whl' -o -name '*-cp311-*manylinux*x86_64.whl' \) 2>/dev/null | sort | head -n 1 || true
}
wheel=$(find_wheel)
if [ -z "$wheel" ]; then
  "$python" -m pip download --quiet --no-deps --only-binary=:all: \
    --python-version 3.11 --implementation cp --abi cp311 --platform manylinux_2_34_x86_64 \
    --dest "$dest" "sglang==$version" >&2
  wheel=$(find_wheel)
fi
[ -n "$wheel" ] || { echo "no sglang $version wheel for cp311 manylinux_2_34_x86_64" >&2; exit 1; }
echo "$wheel"
