#!/usr/bin/env bash
# Builds the execution environment that execution-environment.yml defines, from this checkout,
# with podman and without a registry or Galaxy, and prints the image reference on its last line.
#
#   tools/ee/build.sh        # e.g. localhost/blackwell-sglang-ee:3f2a9c01d4e7
#
# Inputs: the lab's base image (tools/lab/build-image.sh), this collection as a tarball from
# `ansible-galaxy collection build`, community.general as the `ansible` package in the test
# venv bundles it (the copy the collection is tested with), and a wheelhouse of
# tools/ee/wheels.txt downloaded with the venv's pip for the image's Python (Debian 13's 3.13,
# x86_64), whatever the host runs, each package at the test venv's pin (tools/constraints.txt).
# The build itself runs with no network: apt reads the lab's mirror, pip the wheelhouse,
# ansible-galaxy installs offline.
#
# The tag is a hash of every input: the base image reference, the EE definition, this script,
# the wheel list and the pins, the tarball's file checksums (FILES.json) and community.general's
# manifest. An unchanged checkout reuses its image; any change to what the EE holds builds a
# new one.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
venv=${BLACKWELL_VENV:-$root/.venv}
constraints=$root/tools/constraints.txt
cache=${BLACKWELL_CACHE:-$root/.cache}/ee
name=localhost/blackwell-sglang-ee

log() { printf 'ee: %s\n' "$*" >&2; }

[ -x "$venv/bin/ansible-builder" ] || {
  echo "ee: $venv/bin/ansible-builder not found (run tools/bootstrap.sh)" >&2
  exit 1
}
built=$("$root/tools/lab/build-image.sh" trixie)
base=$(tail -n 1 <<<"$built")
mirror=$(tail -n 2 <<<"$built" | head -n 1)

work=$(mktemp -d /var/tmp/blackwell-ee.XXXXXX)
trap 'rm -rf "$work"' EXIT
stage=$work/definition
mkdir -p "$stage/collections/ansible_collections/community" "$work/dist"
cp "$root/execution-environment.yml" "$stage/"

# The collection as users get it: build_ignore in galaxy.yml keeps the tree's caches out.
"$venv/bin/ansible-galaxy" collection build "$root" --output-path "$work/dist" >/dev/null
mv "$work"/dist/blackwell-sglang-*.tar.gz "$stage/collections/blackwell-sglang.tar.gz"
bundle=$(compgen -G "$venv/lib/python3*/site-packages/ansible_collections/community/general" | head -n 1) || {
  echo "ee: no community.general bundled in $venv (run tools/bootstrap.sh)" >&2
  exit 1
}
# With the collections community.general itself declares (community.library_inventory_filtering_v1
# for 13.x), from the same bundle. Their compiled bytecode belongs to the venv's Python, not to
# the image.
bundled=$(dirname "$(dirname "$bundle")")
for fqcn in community.general $("$venv/bin/python" -c 'import json, sys
print(" ".join(json.load(open(sys.argv[1]))["collection_info"]["dependencies"]))' "$bundle/MANIFEST.json"); do
  [ -d "$bundled/${fqcn/.//}" ] || {
    echo "ee: $fqcn, which community.general needs, is not bundled in $venv" >&2
    exit 1
  }
  mkdir -p "$stage/collections/ansible_collections/${fqcn%%.*}"
  tar -C "$bundled/${fqcn%%.*}" --exclude=__pycache__ -c "${fqcn#*.}" |
    tar -C "$stage/collections/ansible_collections/${fqcn%%.*}" -x
done

tag=$(
  {
    echo "$base"
    cat "$root/execution-environment.yml" "$here/build.sh" "$here/wheels.txt" "$constraints"
    tar -xzf "$stage/collections/blackwell-sglang.tar.gz" -O MANIFEST.json FILES.json
    cat "$bundle/MANIFEST.json"
    "$venv/bin/ansible-builder" --version
  } | sha256sum | cut -c1-12
)
image=$name:$tag
if podman image exists "$image"; then
  log "reusing $image"
  echo "$image"
  exit 0
fi

wheels=$cache/wheels-$(cat "$here/wheels.txt" "$constraints" | sha256sum | cut -c1-12)
if [ ! -d "$wheels" ]; then
  log "downloading the wheelhouse (tools/ee/wheels.txt)"
  rm -rf "$wheels.new"
  platforms=()
  for platform in manylinux1 manylinux2014 manylinux_2_5 manylinux_2_17 manylinux_2_28 manylinux_2_34; do
    platforms+=(--platform "${platform}_x86_64")
  done
  "$venv/bin/python" -m pip download -q --disable-pip-version-check --only-binary=:all: \
    --python-version 3.13 --implementation cp --abi cp313 --abi abi3 --abi none "${platforms[@]}" \
    -d "$wheels.new" -r "$here/wheels.txt" -c "$constraints"
  mv "$wheels.new" "$wheels"
fi

log "building $image from $base"
"$venv/bin/ansible-builder" create -f "$stage/execution-environment.yml" -c "$work/context" \
  --output-filename Containerfile >"$work/create.log" 2>&1 || {
  cat "$work/create.log" >&2
  exit 1
}
# runc and lowered rlimits: the only combination Debian's podman 4.3 accepts here.
checkout=$(printf '%s' "$root" | sha256sum | cut -c1-12)
podman build --layers=false --network none --ulimit nofile=1024:1024 --ulimit nproc=4096:4096 \
  --build-arg "EE_BASE_IMAGE=$base" --label "blackwell.sglang.ee.checkout=$checkout" \
  -v "$wheels:/opt/ee-wheels:ro" -v "$mirror:/srv/debian-mirror:ro" \
  -f "$work/context/Containerfile" -t "$image" "$work/context" >"$work/build.log" 2>&1 || {
  tail -n 60 "$work/build.log" >&2
  exit 1
}
# Every change to the tree makes a new image: keep only this checkout's newest. One that a
# container still uses stays (podman refuses), and goes with a later build.
podman images --filter "label=blackwell.sglang.ee.checkout=$checkout" --format '{{.Repository}}:{{.Tag}}' |
  while read -r old; do
    [ "$old" = "$image" ] || podman rmi "$old" >/dev/null 2>&1 || true
  done
echo "$image"
