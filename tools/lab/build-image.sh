#!/usr/bin/env bash
# Builds the lab's base image without any registry: debootstrap a minimal Debian 12 with
# systemd, import it into podman. The tag carries a hash of this script, so a change here
# builds a new image and an unchanged script reuses the one already imported.
#
#   tools/lab/build-image.sh          # prints the image reference
#   LAB_MIRROR=http://mirror.local/debian tools/lab/build-image.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
mirror=${LAB_MIRROR:-http://deb.debian.org/debian}
name=localhost/blackwell-lab-debian12
tag=$(sha256sum "$here/build-image.sh" | cut -c1-12)
image=$name:$tag

if podman image exists "$image"; then
  echo "$image"
  exit 0
fi

packages=python3,python3-apt,python3-venv,systemd,systemd-sysv,dbus,sudo,procps,iproute2,openssh-server,gpgv,ca-certificates
work=$(mktemp -d /var/tmp/blackwell-lab.XXXXXX)
trap 'rm -rf "$work"' EXIT
debootstrap --variant=minbase --include="$packages" bookworm "$work/root" "$mirror" >"$work/debootstrap.log" 2>&1 || {
  tail -n 30 "$work/debootstrap.log" >&2
  exit 1
}
# A container has no consoles or hardware to wait for; these units only slow boot down or fail.
for unit in getty@tty1.service systemd-udevd.service systemd-udev-trigger.service \
  systemd-remount-fs.service sys-kernel-debug.mount sys-kernel-tracing.mount; do
  ln -sf /dev/null "$work/root/etc/systemd/system/$unit"
done
echo 'lab' >"$work/root/etc/hostname"
: >"$work/root/etc/machine-id"
tar -C "$work/root" -c . | podman import --change 'CMD ["/sbin/init"]' - "$image" >/dev/null
podman tag "$image" "$name:latest"
echo "$image"
