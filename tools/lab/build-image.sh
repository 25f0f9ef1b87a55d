#!/usr/bin/env bash
# Builds the lab's base image without any registry, as stock as a cloud image: debootstrap a
# minimal Debian 12 (or, given `trixie`, Debian 13) with systemd, sshd and sudo, a login user `debian` with passwordless sudo
# (what cloud-init leaves on a Debian cloud image) and root SSH login off. Nothing the roles
# install is in it (tools/lab/mirror-packages.txt lists those), no apt lists, no CUDA keyring.
#
# Lab nodes reach no Debian mirror on the internet. The image's apt sources point at the lab's
# own signed mirror instead, bind-mounted read-only at /srv/debian-mirror, built here from the
# same archive as the image: the packages the roles install on a stock node, with everything
# they need that the image lacks. A role that installs something else fails in the lab as it
# would on an air-gapped fleet whose mirror lacks it.
#
#   tools/lab/build-image.sh          # prints the mirror directory, then the image reference
#   tools/lab/build-image.sh trixie   # the same for Debian 13 (its own image name and mirror)
#   LAB_MIRROR=http://mirror.local/debian tools/lab/build-image.sh
#
# The tag carries a hash of this script and its package list, and the id of the mirror's signing
# key: a change to either builds a new image and mirror, an unchanged pair reuses both, and the
# image always trusts exactly the mirror beside it (the key is made per build, and several
# checkouts of the repository on one machine each keep a mirror of their own under their .cache).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
mirror=${LAB_MIRROR:-http://deb.debian.org/debian}
suite=${1:-bookworm}
case $suite in
  bookworm) release=12 mirror_dir=debian-mirror ;;
  trixie) release=13 mirror_dir=debian13-mirror ;;
  *)
    echo "build-image.sh: unknown suite '$suite' (bookworm or trixie)" >&2
    exit 2
    ;;
esac
name=localhost/blackwell-lab-debian$release
tag=$( (cat "$here/build-image.sh" "$here/mirror-packages.txt" "$here/zip_bytecode.py"; echo "$suite") | sha256sum | cut -c1-12)
debs=${BLACKWELL_CACHE:-$root/.cache}/lab/$mirror_dir
# The mirror's packages and key end up trusted by every lab node: reuse them only from a
# directory the caller alone controls.
# shellcheck source=tools/lab/owned-dir.sh
. "$here/owned-dir.sh"
owned_dir "$(dirname "$debs")"
lock_script "$debs.lock" "$@"
# What the roles install with apt on a stock node, one package a line.
mapfile -t mirror_packages < <(grep -v -e '^#' -e '^$' "$here/mirror-packages.txt")

if [ "$(cat "$debs/.inputs" 2>/dev/null)" = "$tag" ] && [ -s "$debs/.key" ]; then
  image=$name:$tag-$(cat "$debs/.key")
  if podman image exists "$image"; then
    echo "$debs"
    echo "$image"
    exit 0
  fi
fi

packages=python3,systemd,systemd-sysv,dbus,sudo,procps,iproute2,openssh-server,ca-certificates
work=$(mktemp -d /var/tmp/blackwell-lab.XXXXXX)
trap 'rm -rf "$work"' EXIT
rootfs=$work/root
debootstrap --variant=minbase --include="$packages" "$suite" "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 || {
  tail -n 30 "$work/debootstrap.log" >&2
  exit 1
}

# The mirror: what apt in this very image would download for the roles' packages.
cp /etc/resolv.conf "$rootfs/etc/resolv.conf"
chroot "$rootfs" apt-get -qq update
chroot "$rootfs" apt-get -qq install --download-only --no-install-recommends -y "${mirror_packages[@]}" >/dev/null
pool=$work/mirror
mkdir -p "$pool"
mv "$rootfs"/var/cache/apt/archives/*.deb "$pool/"
export GNUPGHOME=$work/gnupg
mkdir -m 0700 "$GNUPGHOME"
gpg --batch --quiet --pinentry-mode loopback --passphrase '' \
  --quick-generate-key 'blackwell.sglang lab Debian mirror <lab@example.invalid>' ed25519 sign 0 2>/dev/null
keyid=$(gpg --batch --with-colons --list-keys | awk -F: '$1 == "pub" { print tolower($5); exit }')
image=$name:$tag-$keyid
(
  cd "$pool"
  dpkg-scanpackages . /dev/null 2>/dev/null >Packages
  gzip -9nk Packages
  apt-ftparchive -o APT::FTPArchive::Release::Origin=blackwell-lab \
    -o APT::FTPArchive::Release::Label=debian-mirror release . >Release
  gpg --batch --yes --clearsign -o InRelease Release
)
chmod -R a+rX "$pool"

# A stock node: no package lists or downloads left from the build, the lab mirror as its only
# source, trusted through its own key.
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs/etc/resolv.conf"
rm -f "$rootfs/etc/apt/sources.list"
mkdir -p "$rootfs/etc/apt/keyrings"
gpg --batch --export >"$rootfs/etc/apt/keyrings/blackwell-lab-debian-mirror.gpg"
cat >"$rootfs/etc/apt/sources.list.d/debian.sources" <<'EOF'
# The lab's Debian mirror (tools/lab/build-image.sh), bind-mounted read-only into every node.
Types: deb
URIs: file:/srv/debian-mirror
Suites: ./
Signed-By: /etc/apt/keyrings/blackwell-lab-debian-mirror.gpg
EOF

# The login user a cloud image's cloud-init creates: a sudoer that logs in with a key (fleet.sh
# installs it per node); root never logs in over SSH, and nothing logs in with a password.
chroot "$rootfs" useradd --create-home --shell /bin/bash --groups sudo debian
echo 'debian ALL=(ALL) NOPASSWD:ALL' >"$rootfs/etc/sudoers.d/90-cloud-init-users"
chmod 0440 "$rootfs/etc/sudoers.d/90-cloud-init-users"
printf 'PermitRootLogin no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n' \
  >"$rootfs/etc/ssh/sshd_config.d/50-lab.conf"

# A container has no consoles or hardware to wait for; these units only slow boot down or fail.
for unit in getty@tty1.service systemd-udevd.service systemd-udev-trigger.service \
  systemd-remount-fs.service sys-kernel-debug.mount sys-kernel-tracing.mount; do
  ln -sf /dev/null "$rootfs/etc/systemd/system/$unit"
done
# The one addition a cloud image lacks, for the lab's speed alone: root's Python keeps the bytecode
# of the code Ansible's modules bring in their zip (tools/lab/zip_bytecode.py says why and how).
pyver=$(chroot "$rootfs" python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
site=$rootfs/usr/local/lib/python$pyver/dist-packages
mkdir -p "$site"
install -m 0644 "$here/zip_bytecode.py" "$site/blackwell_lab_zip_bytecode.py"
echo 'import blackwell_lab_zip_bytecode' >"$site/blackwell-lab-zip-bytecode.pth"
install -d -m 0700 "$rootfs/var/cache/blackwell-lab-zip-bytecode"
echo 'lab' >"$rootfs/etc/hostname"
: >"$rootfs/etc/machine-id"
tar -C "$rootfs" -c . | podman import --change 'CMD ["/sbin/init"]' - "$image" >/dev/null
podman tag "$image" "$name:latest"

echo "$tag" >"$pool/.inputs"
echo "$keyid" >"$pool/.key"
mkdir -p "$(dirname "$debs")"
rm -rf "$debs.new" && cp -a "$pool" "$debs.new"
rm -rf "$debs" && mv "$debs.new" "$debs"
echo "$debs"
echo "$image"
