#!/usr/bin/env bash
# A fleet of systemd container nodes reached over SSH, the way real hosts are: each node runs
# sshd, published on a loopback port (127.0.0.1:<base+N> -> 22), and lets the image's sudo user
# `debian` in with a lab key generated on first use; root cannot log in. Every node mounts the
# lab's Debian mirror (built with the image) at /srv/debian-mirror, its only apt source. Writes
# an inventory for the fleet: Ansible logs in as `debian` and escalates where a play says so.
# A fleet may mix Debian releases (LAB_SUITES): each node then runs its release's image and
# mounts that release's mirror.
#
#   tools/lab/fleet.sh up [N]      # start nodes 1..N (default LAB_NODES, 3), write the inventory
#   tools/lab/fleet.sh down        # remove this fleet's containers (the key and inventory stay)
#   tools/lab/fleet.sh inventory   # rewrite the inventory for the running nodes
#
# Settings (environment): LAB_NODES, LAB_PREFIX (container name prefix, default blackwell-lab),
# LAB_PORT_BASE (default 2200: node 1 listens on 127.0.0.1:2201), LAB_STATE (key directory,
# default lab/state),
# LAB_INVENTORY (default inventories/lab/hosts.yml), LAB_VOLUMES (extra podman -v arguments,
# space separated, e.g. a package repository bind-mounted read-only into every node),
# LAB_SSH_WAIT (seconds to wait for each node's sshd, default 300), LAB_BOOT_TRIES (containers
# tried for a node whose systemd exits while booting, default 3), LAB_GROUP (the inventory
# group of the nodes, default sglang_nodes: the group site.yml targets), LAB_SUITES (the Debian
# suite of each node, space separated: node N runs the Nth, nodes past the list the last one;
# default bookworm for all, e.g. "bookworm trixie" for a Debian 12 and a Debian 13 node).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tools/lab/owned-dir.sh
. "$root/tools/lab/owned-dir.sh"
prefix=${LAB_PREFIX:-blackwell-lab}
port_base=${LAB_PORT_BASE:-2200}
state=${LAB_STATE:-$root/lab/state}
inventory=${LAB_INVENTORY:-$root/inventories/lab/hosts.yml}
label=blackwell.sglang.lab=$prefix
# The image's login user (tools/lab/build-image.sh), as a cloud image's cloud-init creates it.
user=debian

die() { echo "fleet: $*" >&2; exit 1; }

nodes_running() {
  podman ps --filter "label=$label" --format '{{.Names}}' | sort
}

ensure_key() {
  # The nodes trust this key: its directory must be the caller's alone.
  owned_dir "$state"
  chmod 0700 "$state"
  if [ ! -f "$state/id_ed25519" ]; then
    ssh-keygen -q -t ed25519 -N '' -C "$prefix" -f "$state/id_ed25519"
  fi
}

node_name() { printf '%s-%02d' "$prefix" "$1"; }

# The suite node N runs: the Nth of LAB_SUITES, or its last one.
read -r -a suites <<<"${LAB_SUITES:-bookworm}"
[ "${#suites[@]}" -gt 0 ] || suites=(bookworm)
node_suite() {
  local i=$1
  [ "$i" -le "${#suites[@]}" ] || i=${#suites[@]}
  echo "${suites[i - 1]}"
}

# Each suite's image and mirror, as build-image.sh prints them (it reuses what it built before).
declare -A images mirrors
build_images() {
  local suite built
  for suite in $(printf '%s\n' "${suites[@]}" | sort -u); do
    built=$("$root/tools/lab/build-image.sh" "$suite")
    images[$suite]=$(tail -n 1 <<<"$built")
    mirrors[$suite]=$(tail -n 2 <<<"$built" | head -n 1)
  done
}

run_node() {
  local i=$1 name port suite
  name=$(node_name "$i")
  port=$((port_base + i))
  suite=$(node_suite "$i")
  local volumes=(-v "${mirrors[$suite]}:/srv/debian-mirror:ro") caps=()
  for v in ${LAB_VOLUMES:-}; do volumes+=(-v "$v"); done
  # Debian 13's systemd (257) starts no unit that runs as another user with ProtectHostname=,
  # ProtectClock= or ProtectKernelTunables= (sglang.service has all three) unless PID 1 holds
  # CAP_SYS_ADMIN, as it does on a host: without it the unit fails with status 217/USER, "Failed
  # to keep CAP_SYS_ADMIN". Podman leaves that capability out by default; Debian 12's systemd
  # skips the namespace it cannot set up instead.
  [ "$suite" = bookworm ] || caps=(--cap-add SYS_ADMIN)
  # runc and lowered rlimits: the only combination Debian's podman 4.3 accepts here.
  podman run -d --name "$name" --hostname "$name" --label "$label" "${caps[@]}" \
    --systemd=always --ulimit nofile=1024:1024 --ulimit nproc=4096:4096 \
    -p "127.0.0.1:$port:22" "${volumes[@]}" "${images[$suite]}" /sbin/init >/dev/null
}

start_node() {
  local name
  name=$(node_name "$1")
  if podman container exists "$name"; then
    podman start "$name" >/dev/null
  else
    run_node "$1"
  fi
}

node_state() {
  podman inspect -f '{{.State.Status}} exit={{.State.ExitCode}} oom={{.State.OOMKilled}}' "$1" 2>/dev/null ||
    echo "gone"
}

# A node whose systemd exits while booting (seen now and then on a 2-core machine starting
# several labs at once) is reported with its state and log, and replaced by a new container,
# up to LAB_BOOT_TRIES times. The key goes in only once systemd has been seen running; a node
# that stops between that look and the exec, or before its sshd answers, is caught there.
boot_node() {
  local i=$1 name status try
  name=$(node_name "$i")
  for try in $(seq 1 "${LAB_BOOT_TRIES:-3}"); do
    status=$(node_state "$name")
    if [ "${status%% *}" = running ] && authorize_key "$name" && wait_ssh "$i"; then
      return 0
    fi
    # A node on its way down ("stopping") can be neither started nor exec'd into: wait until
    # it has stopped, so that what follows sees its final state and log.
    for _ in $(seq 1 30); do
      case "$(node_state "$name")" in stopping* | running*) sleep 1 ;; *) break ;; esac
    done
    status=$(node_state "$name")
    echo "fleet: $name stopped while booting (try $try; $status); its log:" >&2
    podman logs --tail 40 "$name" >&2 || true
    podman rm -f -t 0 "$name" >/dev/null 2>&1 || true
    run_node "$i"
    sleep 2
  done
  die "$name did not stay up in ${LAB_BOOT_TRIES:-3} tries ($(node_state "$name"))"
}

# What cloud-init does with the key a cloud user is given at launch.
authorize_key() {
  podman exec -i --user "$user" "$1" sh -c \
    'umask 077 && mkdir -p ~/.ssh && cat >~/.ssh/authorized_keys' <"$state/id_ed25519.pub"
}

# 0 once the node's sshd lets the lab key in; 1 as soon as the node is seen stopped.
wait_ssh() {
  local i=$1 name port tries=0
  name=$(node_name "$i")
  port=$((port_base + i))
  until ssh -i "$state/id_ed25519" -p "$port" -o BatchMode=yes -o ConnectTimeout=3 \
    -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR \
    "$user@127.0.0.1" true 2>/dev/null; do
    tries=$((tries + 1))
    # A busy machine boots many systemd containers slowly: minutes, not seconds.
    [ "$tries" -lt "${LAB_SSH_WAIT:-300}" ] || die "$name did not answer on 127.0.0.1:$port"
    case "$(node_state "$name")" in running*) sleep 1 ;; *) return 1 ;; esac
  done
}

write_inventory() {
  owned_dir "$(dirname "$inventory")"
  local tmp name i
  tmp=$(mktemp "$inventory.XXXXXX")
  {
    echo "# Generated by tools/lab/fleet.sh for the running lab nodes of $label; rewritten on each 'up'."
    echo "all:"
    echo "  children:"
    echo "    ${LAB_GROUP:-sglang_nodes}:"
    echo "      vars:"
    echo "        ansible_user: $user"
    echo "        ansible_host: 127.0.0.1"
    echo "        ansible_ssh_private_key_file: $state/id_ed25519"
    # Lab nodes are recreated at will and share the image's host keys: nothing to pin.
    echo "        ansible_ssh_common_args: -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR"
    echo "        ansible_python_interpreter: /usr/bin/python3"
    echo "      hosts:"
    for name in $(nodes_running); do
      i=$((10#${name##*-}))
      echo "        $name:"
      echo "          ansible_port: $((port_base + i))"
    done
  } >"$tmp"
  mv "$tmp" "$inventory"
}

cmd=${1:-up}
case "$cmd" in
  up)
    count=${2:-${LAB_NODES:-3}}
    [[ "$count" =~ ^[1-9][0-9]*$ ]] || die "node count must be a positive integer, got '$count'"
    [ "$count" -le 99 ] || die "at most 99 nodes, got $count"
    build_images
    # Every systemd in a container takes several inotify instances from the host's per-user
    # budget (128 on Debian); past it, systemd stalls at boot with "Failed to create inotify
    # object: Too many open files" and sshd never starts. A few dozen nodes need more.
    if [ "$(sysctl -n fs.inotify.max_user_instances)" -lt 8192 ]; then
      sysctl -q -w fs.inotify.max_user_instances=8192
    fi
    ensure_key
    for i in $(seq 1 "$count"); do start_node "$i"; done
    for i in $(seq 1 "$count"); do
      boot_node "$i"
    done
    write_inventory
    echo "fleet: $count node(s) up, inventory $inventory"
    ;;
  down)
    names=$(podman ps -a --filter "label=$label" --format '{{.Names}}')
    # Nothing on a lab node needs a clean shutdown; systemd as PID 1 ignores SIGTERM anyway.
    for name in $names; do podman rm -f -t 0 "$name" >/dev/null; done
    # Only this fleet's inventory: another fleet's may sit at the same path.
    if grep -qs "nodes of $label;" "$inventory"; then rm -f "$inventory"; fi
    echo "fleet: removed $(echo "$names" | grep -c . || true) node(s)"
    ;;
  inventory)
    write_inventory
    echo "$inventory"
    ;;
  *)
    die "unknown command '$cmd' (up, down, inventory)"
    ;;
esac
