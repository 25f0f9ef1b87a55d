#!/usr/bin/env bash
# Builds the lab's stand-in for NVIDIA's CUDA network repository: a flat apt repository laid
# out like NVIDIA's (<out>/<distribution>/x86_64/), signed with a throwaway key generated per build,
# holding packages named as NVIDIA names them. Their payload is real: the toolkit trees are
# unpacked from NVIDIA's own PyPI wheels into /usr/local/cuda-12.8, /usr/local/cuda-13.0 and
# /usr/local/cuda-13.5 (a later 13.x, what a fleet moves to from 13.0), and the config-common
# packages register /usr/local/cuda and /usr/local/cuda-<major> with update-alternatives the way
# NVIDIA's do.
#
#   tools/lab/build-cuda-repo.sh        # prints the output directory
#   LAB_CUDA_REPO_DISTRO=ubuntu2404 tools/lab/build-cuda-repo.sh
#
# LAB_CUDA_REPO_DISTRO names the distribution directory (debian12, the lab image's, by default,
# which also writes debian13 beside it for the lab's Debian 13 nodes, signed with the same key;
# ubuntu2204 and ubuntu2404 as NVIDIA names theirs). The packages are the same for each: only
# the path apt and the role compose from it differs. A distribution other than debian12 is
# built into its own output directory, so the lab's repository stays as it is.
# LAB_CUDA_REPO_URL is the address the nodes reach the repository under (the lab bind-mounts
# the output directory at /srv/cuda-repo); cuda-keyring's sources list points there, as
# NVIDIA's points at its download host. The output is reused until an input changes.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cache=${BLACKWELL_CACHE:-$root/.cache}
distro=${LAB_CUDA_REPO_DISTRO:-debian12}
case $distro in
  debian12 | debian13 | ubuntu2204 | ubuntu2404) ;;
  *) echo "LAB_CUDA_REPO_DISTRO=$distro: NVIDIA publishes debian12, debian13, ubuntu2204 and ubuntu2404" >&2; exit 2 ;;
esac
# The distribution directories written, one pool of packages each.
distros=$distro
if [ "$distro" = debian12 ]; then
  distros="debian12 debian13"
  out=${LAB_CUDA_REPO_OUT:-$cache/lab/cuda-repo}
else
  out=${LAB_CUDA_REPO_OUT:-$cache/lab/cuda-repo-$distro}
fi
url=${LAB_CUDA_REPO_URL:-file:/srv/cuda-repo}
arch=x86_64
wheels=$cache/wheels
python=${BLACKWELL_VENV:-$root/.venv}/bin/python
[ -x "$python" ] || python=python3

# The 12.8 wheel is what a node "already on 12.8" has; the 13.0 wheel is the upgrade target,
# and the 13.5 wheel the minor release a fleet on 13.0 moves to next.
nvcc12=nvidia-cuda-nvcc-cu12==12.8.93
nvcc13=nvidia-cuda-nvcc==13.0.88
nvcc135=nvidia-cuda-nvcc==13.5.37
# The wheels and the repository built from them end up installed on the nodes as root, and a
# reused output is trusted by its .inputs file: only directories the caller alone controls.
# shellcheck source=tools/lab/owned-dir.sh
. "$here/owned-dir.sh"
owned_dir "$wheels"
owned_dir "$(dirname "$out")"
lock_script "$out.lock" "$@"
for spec in "$nvcc12" "$nvcc13" "$nvcc135"; do
  name=${spec%%==*}
  ver=${spec##*==}
  if ! compgen -G "$wheels/${name//-/_}-$ver-*.whl" >/dev/null; then
    flock "$wheels/.lock" "$python" -m pip download -q --no-deps --only-binary=:all: -d "$wheels" "$spec" >&2
  fi
done
wheel12=$(compgen -G "$wheels/nvidia_cuda_nvcc_cu12-12.8.93-*.whl" | head -n1)
wheel13=$(compgen -G "$wheels/nvidia_cuda_nvcc-13.0.88-*.whl" | head -n1)
wheel135=$(compgen -G "$wheels/nvidia_cuda_nvcc-13.5.37-*.whl" | head -n1)

inputs=$( (sha256sum "$here/build-cuda-repo.sh" "$wheel12" "$wheel13" "$wheel135" | cut -d' ' -f1; echo "$url $distros") | sha256sum | cut -c1-16)
if [ "$(cat "$out/.inputs" 2>/dev/null)" = "$inputs" ] && [ -f "$out/$distro/$arch/InRelease" ]; then
  echo "$out"
  exit 0
fi

work=$(mktemp -d /var/tmp/blackwell-cuda-repo.XXXXXX)
trap 'rm -rf "$work"' EXIT
pool=$work/pool
mkdir -p "$pool"

unpack() { # wheel dest: the wheel's files, without Python packaging
  "$python" - "$1" "$2" <<'PY'
import os, stat, sys, zipfile
wheel, dest = sys.argv[1:]
with zipfile.ZipFile(wheel) as zf:
    for info in zf.infolist():
        if info.is_dir() or ".dist-info/" in info.filename or info.filename.endswith("__init__.py"):
            continue
        target = os.path.join(dest, info.filename)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with zf.open(info) as src, open(target, "wb") as dst:
            dst.write(src.read())
        mode = info.external_attr >> 16
        os.chmod(target, 0o755 if mode & stat.S_IXUSR else 0o644)
PY
}

# NVIDIA's layout: headers and libraries live under targets/<triple>/, reached through the
# include and lib64 links at the top of the versioned tree.
layout() { # src prefix
  local src=$1 prefix=$2
  mkdir -p "$prefix/targets/x86_64-linux/include" "$prefix/targets/x86_64-linux/lib"
  ln -s targets/x86_64-linux/include "$prefix/include"
  ln -s targets/x86_64-linux/lib "$prefix/lib64"
  cp -a "$src/bin" "$prefix/bin"
  cp -a "$src/include/." "$prefix/targets/x86_64-linux/include/"
  if [ -d "$src/nvvm" ]; then cp -a "$src/nvvm" "$prefix/nvvm"; fi
}

control() { # dir package version arch depends description
  mkdir -p "$1/DEBIAN"
  {
    echo "Package: $2"
    echo "Version: $3"
    echo "Architecture: $4"
    echo "Maintainer: blackwell.sglang lab <lab@example.invalid>"
    [ -n "$5" ] && echo "Depends: $5"
    echo "Section: devel"
    echo "Priority: optional"
    echo "Description: $6"
    echo " Built by tools/lab/build-cuda-repo.sh for the blackwell.sglang container lab."
  } >"$1/DEBIAN/control"
}

build() { # dir
  find "$1" -path "$1/DEBIAN" -prune -o -type d -exec chmod 0755 {} +
  dpkg-deb --root-owner-group -Znone --build "$1" "$pool" >/dev/null
}

alternatives_scripts() { # dir version major priority
  local dir=$1 ver=$2 major=$3 prio=$4
  cat >"$dir/DEBIAN/postinst" <<SH
#!/bin/sh
set -e
if [ "\$1" = configure ]; then
  update-alternatives --install /usr/local/cuda cuda /usr/local/cuda-$ver $prio
  update-alternatives --install /usr/local/cuda-$major cuda-$major /usr/local/cuda-$ver $prio
fi
SH
  cat >"$dir/DEBIAN/prerm" <<SH
#!/bin/sh
set -e
if [ "\$1" = remove ] || [ "\$1" = deconfigure ]; then
  update-alternatives --remove cuda /usr/local/cuda-$ver
  update-alternatives --remove cuda-$major /usr/local/cuda-$ver
fi
SH
  chmod 0755 "$dir/DEBIAN/postinst" "$dir/DEBIAN/prerm"
}

toolkit() { # wheel wheel-prefix ver(12.8) major dash(12-8) full(12.8.93) meta-revisions...
  local wheel=$1 wprefix=$2 ver=$3 major=$4 dash=$5 full=$6
  shift 6
  local src=$work/src-$dash
  unpack "$wheel" "$src"
  local d=$work/pkg/cuda-nvcc-$dash
  layout "$src/$wprefix" "$d/usr/local/cuda-$ver"
  control "$d" "cuda-nvcc-$dash" "$full-1" amd64 "" "CUDA nvcc $ver (from NVIDIA's PyPI wheel)"
  build "$d"
  d=$work/pkg/cuda-toolkit-$dash-config-common
  mkdir -p "$d"
  control "$d" "cuda-toolkit-$dash-config-common" "$full-1" all "" "CUDA $ver alternatives"
  alternatives_scripts "$d" "$ver" "$major" "${dash//-/}"
  build "$d"
  for rev in "$@"; do
    d=$work/pkg/cuda-toolkit-$dash-$rev
    control "$d" "cuda-toolkit-$dash" "$full-$rev" amd64 \
      "cuda-nvcc-$dash (>= $full-1), cuda-toolkit-$dash-config-common (>= $full-1)" "CUDA Toolkit $ver meta-package"
    build "$d"
  done
}

# The 12.8 wheel carries ptxas, NVVM and the crt headers but no nvcc driver binary; the tree
# is kept as the wheel gives it rather than completed with anything invented.
toolkit "$wheel12" nvidia/cuda_nvcc 12.8 12 12-8 12.8.93 1
# Two revisions of the 13.0 meta-package let the lab move a version pin.
toolkit "$wheel13" nvidia/cu13 13.0 13 13-0 13.0.88 1 2
toolkit "$wheel135" nvidia/cu13 13.5 13 13-5 13.5.37 1

export GNUPGHOME=$work/gnupg
mkdir -m 0700 "$GNUPGHOME"
gpg --batch --quiet --pinentry-mode loopback --passphrase '' \
  --quick-generate-key 'blackwell.sglang lab CUDA repository <lab@example.invalid>' ed25519 sign 1d 2>/dev/null

for dist in $distros; do
  dir=$work/repo/$dist/$arch
  mkdir -p "$dir"
  cp -l "$pool"/*.deb "$dir"/
  gpg --batch --export --armor >"$dir/cuda-archive-key.pub"
  # The key is new with every build, so its fingerprint is published beside it for the lab's
  # inventory and scenarios to pin (cuda13_repo_key_fingerprint), as NVIDIA publishes its own.
  gpg --batch --show-keys --with-colons "$dir/cuda-archive-key.pub" | awk -F: '$1 == "fpr" { print $10; exit }' \
    >"$dir/cuda-archive-key.fingerprint"

  d=$work/pkg/cuda-keyring-$dist
  mkdir -p "$d/usr/share/keyrings" "$d/etc/apt/sources.list.d"
  gpg --batch --export >"$d/usr/share/keyrings/cuda-archive-keyring.gpg"
  echo "deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] $url/$dist/$arch/ /" \
    >"$d/etc/apt/sources.list.d/cuda-$dist-$arch.list"
  control "$d" cuda-keyring 1.1-1 all "" "GPG keyring and sources list of the lab's CUDA repository"
  echo "/etc/apt/sources.list.d/cuda-$dist-$arch.list" >"$d/DEBIAN/conffiles"
  find "$d" -path "$d/DEBIAN" -prune -o -type d -exec chmod 0755 {} +
  dpkg-deb --root-owner-group -Znone --build "$d" "$dir" >/dev/null

  (
    cd "$dir"
    dpkg-scanpackages --multiversion . /dev/null 2>/dev/null >Packages
    gzip -9nk Packages
    apt-ftparchive -o APT::FTPArchive::Release::Origin=blackwell-lab \
      -o APT::FTPArchive::Release::Label=cuda release . >Release
    gpg --batch --yes --clearsign -o InRelease Release
    gpg --batch --yes -abs -o Release.gpg Release
  )
done
chmod -R a+rX "$work/repo"
echo "$inputs" >"$work/repo/.inputs"
rm -rf "$out.new" && cp -a "$work/repo" "$out.new"
rm -rf "$out" && mv "$out.new" "$out"
echo "$out"
