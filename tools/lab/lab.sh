#!/usr/bin/env bash
# The lab from nothing: installs what it needs, builds the base image and the local package
# sources, starts LAB_NODES (default 3) container nodes reached over SSH on loopback ports,
# converges site.yml against them with inventories/lab, and prints the drift report.
#
#   tools/lab/lab.sh up      # what `make lab` runs
#   tools/lab/lab.sh down    # what `make lab-down` runs
#
# Settings (environment), besides tools/lab/fleet.sh's (LAB_NODES, LAB_PREFIX, LAB_PORT_BASE...):
# LAB_INVENTORY_DIR (default inventories/lab: the generated hosts.yml goes there; any other
# directory gets a group_vars link to inventories/lab's, so a second lab, a test's or a
# benchmark's, runs with the same settings), LAB_PLAYBOOK (default site.yml), LAB_REPORT (1:
# print the drift report after the converge; 0: stop after the converge), LAB_CONVERGE (1:
# converge the playbook; 0: stop once the nodes are up and prepared, for a test that converges
# with an Ansible of its own), LAB_CONVERGE_ARGS (extra ansible-playbook arguments for the
# converge, space separated; e.g. "-e sglang_rollout_serial=100%" converges every node at once
# instead of one by one). Read by inventories/lab's settings: LAB_SGLANG_VERSION (default
# 0.5.8, a release the SM120 patch is essential for; 0.5.23 shows the newer release's policy
# outcomes) and LAB_CRASH_POLICY (default strict; warn deploys 0.5.23 without its fusion flag).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
export BLACKWELL_VENV=${BLACKWELL_VENV:-$root/.venv}
export LAB_STATE=${LAB_STATE:-$root/lab/state}
inventory_dir=$(realpath -m "${LAB_INVENTORY_DIR:-$root/inventories/lab}")
export LAB_INVENTORY=$inventory_dir/hosts.yml
playbook=${LAB_PLAYBOOK:-$root/site.yml}

step() { printf '\n==> %s\n' "$*"; }

down() {
  tools/lab/fleet.sh down
}

up() {
  step "Installing podman, debootstrap and the Python tooling (tools/bootstrap.sh)"
  tools/bootstrap.sh
  step "Building the lab base image and its Debian mirror (tools/lab/build-image.sh)"
  tools/lab/build-image.sh

  # The nodes read NVIDIA's repository and PyPI from local copies the lab builds, mounted
  # where inventories/lab/group_vars/all.yml points the roles.
  local volumes=()
  if [ -x tools/lab/build-cuda-repo.sh ]; then
    step "Building the local CUDA apt repository (tools/lab/build-cuda-repo.sh)"
    volumes+=("$(tools/lab/build-cuda-repo.sh | tail -n 1):/srv/cuda-repo:ro")
  fi
  if [ -x tools/lab/build-wheelhouse.sh ]; then
    step "Filling the SGLang wheelhouse (tools/lab/build-wheelhouse.sh)"
    volumes+=("$(BLACKWELL_PYTHON=$BLACKWELL_VENV/bin/python tools/lab/build-wheelhouse.sh | tail -n 1):/srv/wheelhouse:ro")
  fi
  # A test's own package sources come after the lab's (LAB_EXTRA_VOLUMES).
  # shellcheck disable=SC2206 # word splitting of LAB_EXTRA_VOLUMES is the point
  volumes+=(${LAB_EXTRA_VOLUMES:-})
  export LAB_VOLUMES="${volumes[*]:-}"

  if [ "$inventory_dir" != "$root/inventories/lab" ]; then
    mkdir -p "$inventory_dir"
    ln -sfn "$root/inventories/lab/group_vars" "$inventory_dir/group_vars"
  fi
  step "Starting ${LAB_NODES:-3} lab nodes (tools/lab/fleet.sh)"
  tools/lab/fleet.sh up "${LAB_NODES:-3}"

  export ANSIBLE_COLLECTIONS_PATH
  ANSIBLE_COLLECTIONS_PATH=$(tools/collection-path.sh)
  if [ "$playbook" = "$root/site.yml" ]; then
    # No GPU, no engine: the shared lab preparation puts the stand-in launcher where
    # the unit's `sglang.launch_server` finds it, as the roles' own scenarios do.
    step "Preparing the nodes (the stand-in launcher for the engine)"
    MOLECULE_PROJECT_DIRECTORY=$root "$BLACKWELL_VENV/bin/ansible-playbook" -i "$inventory_dir" \
      molecule/shared/prepare_standin.yml
  fi
  [ "${LAB_CONVERGE:-1}" = 1 ] || return 0
  step "Converging $(basename "$playbook") on the lab"
  # shellcheck disable=SC2086 # word splitting of LAB_CONVERGE_ARGS is the point
  "$BLACKWELL_VENV/bin/ansible-playbook" -i "$inventory_dir" "$playbook" ${LAB_CONVERGE_ARGS:-}
  [ "${LAB_REPORT:-1}" = 1 ] || return 0

  step "Drift report (tools/drift-report)"
  local rc=0 inv state
  inv=$(realpath --relative-to="$root" "$inventory_dir")
  state=$(realpath --relative-to="$root" "$LAB_STATE")
  tools/drift-report -i "$inv" -p "$playbook" \
    --json "$LAB_STATE/drift-report.json" --markdown "$LAB_STATE/drift-report.md" || rc=$?

  if [ "$playbook" = "$root/site.yml" ]; then
    step "What the converge did on each node (tools/lab/summary.yml)"
    if "$BLACKWELL_VENV/bin/ansible-playbook" -i "$inventory_dir" tools/lab/summary.yml \
        -e "lab_summary_file=$LAB_STATE/summary.txt" >"$LAB_STATE/summary.log" 2>&1; then
      cat "$LAB_STATE/summary.txt"
      cat <<'EOF'

Why: gpu_facts asked the nodes' nvidia-smi (the lab's stand-in, replaying the recorded
8x RTX PRO 6000 box) and got compute capability 12.0 GPUs on PCIe. sglang_sm120_patch therefore
put key 12 into SGLang's two torch symmetric-memory dicts (releases 0.5.5 to 0.5.13 raise
KeyError: 12 without it, and later ones silently turn the communicator off); the TP size is the
GPU count; --enable-torch-symm-mem is sglang_service's default, and the release's FlashInfer
fusion flag is there because the lab inventory opts in as the field report did (left out when
the release's fusion rejects these GPUs and the crash policy is warn); SGLANG_ENABLE_PCIE_IPC_ALLREDUCE=1 appears when the release ships the PCIe all-reduce and
the topology is pcie_only.
EOF
    else
      echo "lab: the summary could not be read; see $LAB_STATE/summary.log" >&2
      rc=2
    fi
  fi

  cat <<EOF

The lab is up: $(grep -c '^        [^ ].*:$' "$LAB_INVENTORY") node(s), inventory $inv/.
  ssh -i $state/id_ed25519 -p $((${LAB_PORT_BASE:-2200} + 1)) debian@127.0.0.1   # node 1 (sudo works)
  tools/drift-report -i $inv -p $(realpath --relative-to="$root" "$playbook")   # check again
Report files: $state/drift-report.json, $state/drift-report.md
Tear it down with: make lab-down
EOF
  return "$rc"
}

case "${1:-up}" in
  up) up ;;
  down) down ;;
  *) echo "lab: unknown command '$1' (up, down)" >&2; exit 1 ;;
esac
