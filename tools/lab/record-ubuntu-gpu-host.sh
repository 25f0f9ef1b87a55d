#!/usr/bin/env bash
# Records what this collection does on a real Ubuntu GPU host with no network and no systemd,
# for tests/unit/test_ubuntu_gpu_host.py. Run it as root on that host from a checkout of this
# collection, with a folder of things the host cannot download:
#
#   tools/lab/record-ubuntu-gpu-host.sh OUT CARRY
#
# CARRY holds
#   wheels/        ansible-core and the wheels it needs that the host's python3 lacks
#   collections/   ansible_collections/ansible/posix (the json stdout callback) and the part
#                  of community.general the cuda13 role uses (alternatives)
#   sglang/        one real SGLang wheel from PyPI (a pure-Python release)
#   cuda-repo/     a repository laid out like NVIDIA's <distro>/x86_64/, metadata and key only
#                  (LAB_CUDA_REPO_DISTRO=ubuntu2404 tools/lab/build-cuda-repo.sh): check mode
#                  reads the lists and never fetches a package
#
# OUT gets
#   host/    the host as found: os-release, kernel, CUDA packages and links, ansible version
#   raw/     nvidia-smi's answers (p2p matrices, PCIe links, persistence), the kernel command
#            line and the IOMMU units, each with its exit status as the last line
#   gpu/     tools/lab/record-gpu-host.sh's recording (gpu_facts ad hoc, nvidia-smi answers
#            including the p2p matrices, the kernel command line and the IOMMU units, in the
#            layout the stand-in nvidia-smi replays)
#   runs/    one ansible-playbook run each: NAME.json (the ansible.posix.json callback's
#            report), NAME.stderr, NAME.rc, NAME.cmd (the command line)
#
# Fact gathering's result is cut down to the facts the roles and the tests read (distribution,
# architecture, kernel, Python, service manager, virtualisation, size): the rest (environment,
# serial numbers, addresses, mounts) says nothing about the collection and should not be
# committed. `record-ubuntu-gpu-host.sh --trim OUT` applies that cut to an earlier recording.
#
# The runs: playbooks/preflight.yml; sglang_sm120_patch on a venv holding the SGLang wheel,
# once with the node's real GPU facts, once with sglang_sm120_patch_capabilities [12] and once
# more the same; cuda13 in --check --diff against the carried repository; cuda13 in --check with
# NVIDIA's URL, which fails without a network. The check runs must leave the host as it was:
# runs/state.txt holds a digest of every file they could touch, before and after.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)

# trim_setup_facts PYTHON REPORT...: keep only the named facts of each fact-gathering result.
trim_setup_facts() {
  "$@" <<'PY'
import json
import sys

KEEP = {
    "ansible_architecture", "ansible_distribution", "ansible_distribution_major_version",
    "ansible_distribution_release", "ansible_distribution_version", "ansible_kernel",
    "ansible_memtotal_mb", "ansible_os_family", "ansible_pkg_mgr", "ansible_processor_vcpus",
    "ansible_python", "ansible_python_version", "ansible_service_mgr", "ansible_system",
    "ansible_virtualization_role", "ansible_virtualization_type", "gather_subset", "module_setup",
}
for path in sys.argv[1:]:
    with open(path) as handle:
        report = json.load(handle)
    for play in report.get("plays", []):
        for task in play.get("tasks", []):
            for result in task.get("hosts", {}).values():
                facts = result.get("ansible_facts")
                if isinstance(facts, dict) and "module_setup" in facts:
                    result["ansible_facts"] = {k: v for k, v in facts.items() if k in KEEP}
    with open(path, "w") as handle:
        json.dump(report, handle, indent=4, sort_keys=True)
        handle.write("\n")
PY
}

if [ "${1:-}" = --trim ]; then
  trim_setup_facts "${RECORD_PYTHON:-python3}" - "${2:?usage: record-ubuntu-gpu-host.sh --trim OUT}"/runs/*.json
  exit
fi
out=${1:?usage: record-ubuntu-gpu-host.sh OUT CARRY}
carry=$(cd "${2:?usage: record-ubuntu-gpu-host.sh OUT CARRY}" && pwd)
python=${RECORD_PYTHON:-$(command -v python3)}
mkdir -p "$out/host" "$out/raw" "$out/runs"
out=$(cd "$out" && pwd)
work=$(mktemp -d -t record-ubuntu-gpu-host.XXXXXX)
trap 'rm -rf "$work"' EXIT

# ansible-core from the carried wheels; jinja2, PyYAML and packaging come from the host.
"$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
  --target "$work/site" "$carry"/wheels/*.whl || exit 1
export PYTHONPATH=$work/site${PYTHONPATH:+:$PYTHONPATH}
export ANSIBLE_COLLECTIONS_PATH
ANSIBLE_COLLECTIONS_PATH=$("$root/tools/collection-path.sh"):$carry/collections
export ANSIBLE_NOCOLOR=1 ANSIBLE_FORCE_COLOR=0 ANSIBLE_LOCALHOST_WARNING=false \
  ANSIBLE_INVENTORY_UNPARSED_WARNING=false ANSIBLE_RETRY_FILES_ENABLED=false
# The collection's ansible.cfg caches facts under ~/.ansible; a recording starts from none.
export ANSIBLE_CACHE_PLUGIN_CONNECTION=$work/fact-cache ANSIBLE_HOME=$work/ansible-home
cd "$root" || exit 1

# capture FILE COMMAND...: stdout and stderr together, then the exit status as the last line.
capture() {
  local file=$1
  shift
  { "$@" 2>&1; echo "exit status: $?"; } >"$file"
}

# --- the host as found ------------------------------------------------------------------------
cp /etc/os-release "$out/host/os-release"
uname -a >"$out/host/uname.txt"
capture "$out/host/dpkg-cuda.txt" dpkg -l 'cuda*'
capture "$out/host/alternatives-cuda.txt" update-alternatives --query cuda
capture "$out/host/apt-sources.txt" sh -c 'ls -l /etc/apt/sources.list.d/ /etc/apt/keyrings/'
capture "$out/host/ansible-version.txt" "$python" -m ansible adhoc --version
{
  echo "python3: $python"
  echo "pid 1: $(cat /proc/1/comm)"
  echo "python3-apt for /usr/bin/python3: $(/usr/bin/python3 -c 'import apt_pkg; print("yes")' 2>&1 | tail -n1)"
  echo "nvcc through /usr/local/cuda: $(/usr/local/cuda/bin/nvcc --version 2>&1 | tail -n2 | head -n1)"
} >"$out/host/facts.txt"

# --- raw answers kept for later ---------------------------------------------------------------
capture "$out/raw/topo-p2p-r.txt" nvidia-smi topo -p2p r
capture "$out/raw/topo-p2p-w.txt" nvidia-smi topo -p2p w
capture "$out/raw/topo-m.txt" nvidia-smi topo -m
capture "$out/raw/query-pcie.csv" nvidia-smi \
  --query-gpu=index,pci.bus_id,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max,persistence_mode \
  --format=csv,noheader,nounits
capture "$out/raw/proc-cmdline.txt" cat /proc/cmdline
capture "$out/raw/sys-class-iommu.txt" ls -l /sys/class/iommu

# --- gpu_facts, as for every recorded host ----------------------------------------------------
RECORD_PYTHON=$python "$root/tools/lab/record-gpu-host.sh" "$out/gpu"

# --- playbook runs -----------------------------------------------------------------------------
# play NAME ARGS...: one ansible-playbook run against this host, its report kept as data.
play() {
  local name=$1
  shift
  local cmd=("$python" -m ansible playbook -i localhost, -c local
    -e "ansible_python_interpreter=$python" -e sglang_become=false "$@")
  printf '%q ' "${cmd[@]}" >"$out/runs/$name.cmd"
  echo >>"$out/runs/$name.cmd"
  ANSIBLE_STDOUT_CALLBACK=ansible.posix.json timeout 300 "${cmd[@]}" \
    >"$out/runs/$name.json" 2>"$out/runs/$name.stderr"
  echo $? >"$out/runs/$name.rc"
}

# state NAME: a digest of everything the cuda13 role could write (the files under /etc it
# manages, the alternatives and /usr/local's entries with their link targets, dpkg's selections
# and status), to prove the check runs wrote nothing. The toolkit trees themselves are only
# written by apt, whose status file covers them.
state() {
  local digest
  digest=$( {
    find /etc/apt /etc/profile.d /etc/ld.so.conf.d -xdev -type f -print0 2>/dev/null \
      | sort -z | xargs -0 sha256sum 2>/dev/null
    find /etc/apt /etc/profile.d /etc/ld.so.conf.d /etc/alternatives -xdev -printf '%p %y %m %l\n' 2>/dev/null | sort
    find /usr/local -maxdepth 1 -printf '%p %y %m %l\n' | sort
    dpkg --get-selections
    sha256sum /var/lib/dpkg/status
  } | sha256sum | cut -c1-64)
  echo "$1 $digest" >>"$out/runs/state.txt"
}

# Playbooks shaped like playbooks/node.yml's play, one role each.
for role in sglang_sm120_patch cuda13; do
  cat >"$work/$role.yml" <<YAML
---
- name: Apply blackwell.sglang.$role
  hosts: all
  become: "{{ sglang_become | default(true) }}"
  roles:
    - role: blackwell.sglang.$role
YAML
done

play preflight playbooks/preflight.yml

# The patch target: a venv laid out as sglang_install leaves it, SGLang unpacked from its wheel.
venv=$work/sglang-venv
"$python" -m venv --without-pip "$venv"
pyver=$("$venv/bin/python" -c 'import sys; print("python%d.%d" % sys.version_info[:2])')
wheel=$(compgen -G "$carry/sglang/sglang-*.whl" | head -n1)
"$python" -m zipfile -e "$wheel" "$venv/lib/$pyver/site-packages"
"$python" -m zipfile -e "$wheel" "$work/sglang-wheel"
basename "$wheel" >"$out/runs/sglang-wheel.txt"
play patch-real-facts "$work/sglang_sm120_patch.yml" -e "sglang_sm120_patch_venv=$venv"
play patch-sm120 "$work/sglang_sm120_patch.yml" -e "sglang_sm120_patch_venv=$venv" \
  -e '{"sglang_sm120_patch_capabilities": [12]}'
play patch-sm120-again "$work/sglang_sm120_patch.yml" -e "sglang_sm120_patch_venv=$venv" \
  -e '{"sglang_sm120_patch_capabilities": [12]}'
(cd "$work" && diff -ru "sglang-wheel/sglang/srt/distributed/device_communicators" \
  "sglang-venv/lib/$pyver/site-packages/sglang/srt/distributed/device_communicators" \
  -x __pycache__) >"$out/runs/patch.diff"

distro=$(. /etc/os-release && echo "${ID}${VERSION_ID//./}")
state before
play cuda13-check "$work/cuda13.yml" --check --diff \
  -e "cuda13_repo_base_url=file://$carry/cuda-repo" \
  -e "cuda13_repo_key_url=file://$carry/cuda-repo/$distro/x86_64/cuda-archive-key.pub" \
  -e "cuda13_repo_key_fingerprint=$(cat "$carry/cuda-repo/$distro/x86_64/cuda-archive-key.fingerprint")"
state after-cuda13-check
play cuda13-no-network "$work/cuda13.yml" --check
state after-cuda13-no-network
trim_setup_facts "$python" - "$out"/runs/*.json
echo "recorded into $out"
