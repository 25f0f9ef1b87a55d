#!/usr/bin/env bash
# Records a GPU host for the gpu_facts tests: nvidia-smi's raw answers, the loaded kernel
# module's /proc text, the kernel command line and the names in /sys/class/iommu (one a line:
# an empty directory cannot be kept in git), and what
# `ansible localhost -m blackwell.sglang.gpu_facts` prints there
# (with and without --check), laid out as tests/fixtures/gpu/<name>/ expects: commands.json
# maps each answer file to the nvidia-smi arguments that printed it, so the stand-in
# nvidia-smi can replay the recording. Run it on the GPU host from a checkout of this
# collection, with ansible-core importable by python3 (or by RECORD_PYTHON):
#
#   tools/lab/record-gpu-host.sh tests/fixtures/gpu/<name>
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dest=${1:?usage: record-gpu-host.sh DIR}
mkdir -p "$dest"
export ANSIBLE_COLLECTIONS_PATH
ANSIBLE_COLLECTIONS_PATH=$("$root/tools/collection-path.sh")
export ANSIBLE_NOCOLOR=1 ANSIBLE_LOCALHOST_WARNING=false ANSIBLE_INVENTORY_UNPARSED_WARNING=false
# The field order is gpu_facts' (plugins/module_utils/gpu.py QUERY_FIELDS).
query=index,name,uuid,compute_cap,memory.total,pci.bus_id,driver_version
query=$query,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max,persistence_mode

# record FILE COMMAND...: stdout to FILE; the exit status and stderr only when there are any.
record() {
  local file=$dest/$1 rc
  shift
  "$@" >"$file" 2>"$file.stderr"
  rc=$?
  [ "$rc" -eq 0 ] || echo "$rc" >"$file.rc"
  [ -s "$file.stderr" ] || rm -f "$file.stderr"
}

record query.csv nvidia-smi "--query-gpu=$query" --format=csv,noheader,nounits
record nvidia-smi.txt nvidia-smi
record nvidia-smi-q.txt nvidia-smi -q
record topo.txt nvidia-smi topo -m
record topo-p2p-r.txt nvidia-smi topo -p2p r
record topo-p2p-w.txt nvidia-smi topo -p2p w
cat >"$dest/commands.json" <<JSON
{
  "nvidia-smi-q.txt": ["-q"],
  "nvidia-smi.txt": [],
  "query.csv": [
    "--query-gpu=$query",
    "--format=csv,noheader,nounits"
  ],
  "topo.txt": ["topo", "-m"],
  "topo-p2p-r.txt": ["topo", "-p2p", "r"],
  "topo-p2p-w.txt": ["topo", "-p2p", "w"]
}
JSON
if [ -r /proc/driver/nvidia/version ]; then
  cp /proc/driver/nvidia/version "$dest/proc_version.txt"
fi
cp /proc/cmdline "$dest/proc_cmdline.txt"
if [ -d /sys/class/iommu ]; then
  ls -1A /sys/class/iommu >"$dest/sys_class_iommu.txt"
fi
python=${RECORD_PYTHON:-$(command -v python3)}
record gpu_facts.adhoc.txt "$python" -m ansible adhoc localhost -c local \
  -e "ansible_python_interpreter=$python" -m blackwell.sglang.gpu_facts
record gpu_facts_check.adhoc.txt "$python" -m ansible adhoc localhost -c local --check \
  -e "ansible_python_interpreter=$python" -m blackwell.sglang.gpu_facts
{
  uname -a
  "$python" -m ansible adhoc --version | grep -E '^ansible |python version|jinja version|pyyaml version'
  echo "nvidia-smi on PATH: $(command -v nvidia-smi || echo none)"
  echo "modinfo: $(command -v modinfo || echo none)"
} >"$dest/host.txt"
