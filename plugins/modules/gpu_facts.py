#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gpu_facts
short_description: Report a node's NVIDIA GPUs, driver, kernel module and GPU topology as facts
version_added: 0.1.0
description:
  - Reads the node's NVIDIA GPUs with C(nvidia-smi --query-gpu) and sets C(ansible_facts.gpu) with
    each GPU's name, UUID, compute capability, memory and PCI bus id, the driver version, the
    CUDA version the driver supports, whether the loaded kernel module is the open one, and
    how each pair of GPUs is linked (NVLink or a PCIe path, from C(nvidia-smi topo -m)).
  - For tensor parallelism over PCIe it also reports each GPU's PCIe link (generation and
    width, current and maximum) and persistence mode from the same C(--query-gpu) call,
    whether each pair of GPUs can read and write peer to peer (C(nvidia-smi topo -p2p r) and
    C(topo -p2p w)), and how the host's IOMMU treats device traffic.
  - A node without GPUs, without C(nvidia-smi), or with a driver that does not answer is a
    normal answer, not a failure. C(present) is then false and C(reason) says why.
  - A driver upgraded on disk while the old kernel module is still loaded makes NVML report
    C(Driver/library version mismatch); the module reports it as C(driver_mismatch=true).
  - Only reads; it never changes the node, in check mode or otherwise.
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
options:
  nvidia_smi:
    description:
      - Path of the C(nvidia-smi) executable to ask.
      - When not set, C(nvidia-smi) is looked up on E(PATH) and in C(/usr/bin); not finding it
        there is reported as C(present=false).
      - When set, the file must exist and be executable; labs point this at a stand-in that
        prints a recorded answer.
    type: path
  proc_driver_version_path:
    description:
      - File the loaded NVIDIA kernel module describes itself in.
      - Tells the open kernel module from the proprietary one, and gives the loaded driver
        version when C(nvidia-smi) cannot answer.
      - When it does not exist, C(modinfo -F license nvidia) is asked instead.
    type: path
    default: /proc/driver/nvidia/version
  proc_cmdline_path:
    description:
      - File holding the kernel command line, read for C(intel_iommu=), C(amd_iommu=),
        C(iommu=) and C(iommu.passthrough=).
      - Tests and labs point it at a recorded command line.
    type: path
    default: /proc/cmdline
    version_added: 0.1.0
  sys_class_iommu_path:
    description:
      - Directory where the kernel registers its IOMMU units (C(dmar0), C(ivhd0), ...).
      - An empty directory means no IOMMU translates device traffic, whatever the command
        line asks; when it cannot be read, the command line alone decides.
      - Tests and labs point it at a directory of their own.
    type: path
    default: /sys/class/iommu
    version_added: 0.1.0
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.facts
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  facts:
    support: full
  platform:
    platforms: posix
notes:
  - Pair links use the legend of C(nvidia-smi topo -m)
    (C(NV<n>) bonded NVLinks; C(PIX), C(PXB), C(PHB), C(NODE), C(SYS) PCIe paths).
  - Peer-to-peer codes use the legend of C(nvidia-smi topo -p2p) (C(OK); C(CNS) chipset, C(GNS)
    GPU, C(TNS) topology not supported; C(NS) not supported; C(U) unknown). A driver that
    refuses C(topo -p2p) leaves them null.
  - The current PCIe generation drops while a GPU idles to save power; compare it with the
    maximum under load.
  - A kernel built to pass devices through by default, without C(iommu=pt) on its command line,
    is reported as C(on).
  - The module sets facts only; policies such as the driver floor CUDA 13.0 needs belong in
    the roles that read them.
seealso:
  - name: nvidia-smi documentation
    description: The query fields and the topology legend this module reads.
    link: https://docs.nvidia.com/deploy/nvidia-smi/index.html
"""

EXAMPLES = r"""
- name: Read the GPUs of the node
  blackwell.sglang.gpu_facts:

- name: Require the open kernel module on Blackwell nodes
  ansible.builtin.assert:
    that:
      - ansible_facts.gpu.kernel_module_open
    fail_msg: "Blackwell GPUs need the open NVIDIA kernel modules"
  when: 12 in ansible_facts.gpu.capability_majors

- name: Ask a stand-in nvidia-smi in a lab without GPUs
  blackwell.sglang.gpu_facts:
    nvidia_smi: /usr/local/lib/lab/nvidia-smi
    proc_driver_version_path: /usr/local/lib/lab/nvidia-version
    proc_cmdline_path: /usr/local/lib/lab/cmdline
    sys_class_iommu_path: /usr/local/lib/lab/iommu

- name: Report when some pairs of GPUs cannot reach each other peer to peer
  ansible.builtin.debug:
    msg: "peer-to-peer is {{ ansible_facts.gpu.topology.p2p }} between this node's GPUs"
  when: ansible_facts.gpu.topology.p2p not in [none, 'ok']

- name: Choose the all-reduce path from the topology
  ansible.builtin.set_fact:
    site_pcie_allreduce: "{{ ansible_facts.gpu.topology.summary == 'pcie_only' }}"
"""

RETURN = r"""
ansible_facts:
  description: Facts added to the host.
  returned: always
  type: complex
  contains:
    gpu:
      description: The node's NVIDIA GPUs.
      returned: always
      type: complex
      contains:
        present:
          description: Whether nvidia-smi listed at least one GPU.
          returned: always
          type: bool
          sample: true
        reason:
          description: Why no GPU is reported; null when C(present) is true.
          returned: always
          type: str
          sample: nvidia-smi was not found
        count:
          description: Number of GPUs listed.
          returned: always
          type: int
          sample: 8
        gpus:
          description: One entry per GPU, ordered by index.
          returned: always
          type: list
          elements: dict
          contains:
            index:
              description: nvidia-smi's index of the GPU.
              type: int
              sample: 0
            name:
              description: Product name.
              type: str
              sample: NVIDIA RTX PRO 6000 Blackwell Server Edition
            uuid:
              description: GPU UUID.
              type: str
              sample: GPU-5f3c1c4e-8a0b-4f6e-9d57-0c1e2a3b4c5d
            compute_capability:
              description: Compute capability as C(major.minor); null when the driver cannot tell.
              type: str
              sample: "12.0"
            major:
              description: Compute capability major.
              type: int
              sample: 12
            minor:
              description: Compute capability minor.
              type: int
              sample: 0
            memory_total_mib:
              description: Total memory in MiB.
              type: int
              sample: 97887
            pci_bus_id:
              description: PCI bus id.
              type: str
              sample: "00000000:17:00.0"
            pcie_link_gen_current:
              description: PCIe generation the link runs at now; it drops while the GPU idles. Null when not reported.
              type: int
              sample: 5
              version_added: 0.1.0
            pcie_link_gen_max:
              description: Highest PCIe generation the GPU and its slot both support. Null when not reported.
              type: int
              sample: 5
              version_added: 0.1.0
            pcie_link_width_current:
              description: Lanes the link runs with now. Null when not reported.
              type: int
              sample: 16
              version_added: 0.1.0
            pcie_link_width_max:
              description: Most lanes the GPU and its slot both support. Null when not reported.
              type: int
              sample: 16
              version_added: 0.1.0
            persistence_mode:
              description: Whether persistence mode is on; null when the GPU does not report it.
              type: bool
              sample: true
              version_added: 0.1.0
        driver_version:
          description:
            - Driver version; from nvidia-smi, or from the loaded kernel module when
              nvidia-smi cannot answer. Null when neither is there.
          returned: always
          type: str
          sample: 580.95.05
        cuda_driver_version:
          description: Highest CUDA version the driver supports, as nvidia-smi prints it.
          returned: always
          type: str
          sample: "13.0"
        kernel_module_open:
          description: Whether the NVIDIA kernel module is the open one; null when unknown.
          returned: always
          type: bool
          sample: true
        kernel_module_source:
          description:
            - Where C(kernel_module_open) was read, C(proc) (the loaded module)
              or C(modinfo) (the module installed on disk); null when unknown.
          returned: always
          type: str
          sample: proc
        driver_mismatch:
          description: Whether NVML refused to start because the loaded kernel module and the installed library differ.
          returned: always
          type: bool
          sample: false
        nvml_library_version:
          description: Version of the installed NVML library when a mismatch is reported and nvidia-smi names it.
          returned: always
          type: str
          sample: "580.95"
        capability_majors:
          description: The distinct compute capability majors present, sorted.
          returned: always
          type: list
          elements: int
          sample: [12]
        topology:
          description: How the GPUs are linked.
          returned: always
          type: complex
          contains:
            pairs:
              description:
                - One entry per pair of GPUs, C(gpu_a < gpu_b), with the C(topo -m) link code
                  and its type, C(nvlink), C(pcie), or C(unknown) for a code outside the legend.
                - C(p2p_read) and C(p2p_write) hold the pair's C(topo -p2p r) and C(topo -p2p w)
                  codes (C(OK), C(CNS), C(GNS), C(TNS), C(NS), C(U)); C(OK) only when both
                  directions are, otherwise the code that is not. Null when the driver did not
                  answer.
              type: list
              elements: dict
              sample: [{"gpu_a": 0, "gpu_b": 1, "link": "NV18", "type": "nvlink", "p2p_read": "OK", "p2p_write": "OK"}]
            summary:
              description:
                - C(nvlink_all) or C(pcie_only) when every pair is linked that way, C(mixed) when
                  the pairs differ or a link code is outside the legend, C(single) for one GPU,
                  C(none) for no GPU or a topology nvidia-smi did not give.
              type: str
              sample: pcie_only
            p2p:
              description:
                - C(ok) when every pair of GPUs reads and writes peer to peer, C(none) when no
                  pair does either, C(partial) in between.
                - Null for one GPU or none, or when the driver did not answer C(topo -p2p).
              type: str
              sample: ok
              version_added: 0.1.0
        iommu:
          description:
            - How the host's IOMMU treats device traffic, from O(proc_cmdline_path) and
              O(sys_class_iommu_path). C(off) when no IOMMU unit is registered (or, when the
              directory cannot be read, the command line switches it off), C(passthrough) when
              a unit is registered and the command line asks for passthrough (C(iommu=pt),
              C(iommu.passthrough=1)), C(on) when a unit translates.
            - Null when neither source says anything.
          returned: always
          type: str
          sample: "off"
          version_added: 0.1.0
        nvidia_smi:
          description: The nvidia-smi executable asked; null when none was found.
          returned: always
          type: str
          sample: /usr/bin/nvidia-smi
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.blackwell.sglang.plugins.module_utils.gpu import gather

# Where driver packages put nvidia-smi when PATH of a non-login shell misses it.
NVIDIA_SMI_DIRS = ["/usr/bin", "/usr/local/nvidia/bin", "/usr/local/bin"]
MODINFO_DIRS = ["/sbin", "/usr/sbin"]


def _read_file(path):
    try:
        with open(path, "r") as handle:
            return handle.read()
    except (IOError, OSError):
        return None


def _list_dir(path):
    try:
        return sorted(os.listdir(path))
    except (IOError, OSError):
        return None


def main():
    module = AnsibleModule(
        argument_spec=dict(
            nvidia_smi=dict(type="path"),
            proc_driver_version_path=dict(type="path", default="/proc/driver/nvidia/version"),
            proc_cmdline_path=dict(type="path", default="/proc/cmdline"),
            sys_class_iommu_path=dict(type="path", default="/sys/class/iommu"),
        ),
        supports_check_mode=True,
    )
    nvidia_smi = module.params["nvidia_smi"]
    if nvidia_smi:
        if not (os.path.isfile(nvidia_smi) and os.access(nvidia_smi, os.X_OK)):
            module.fail_json(msg="nvidia_smi: %s is not an executable file" % nvidia_smi)
    else:
        nvidia_smi = module.get_bin_path("nvidia-smi", opt_dirs=NVIDIA_SMI_DIRS)
    modinfo = module.get_bin_path("modinfo", opt_dirs=MODINFO_DIRS)

    def run(argv):
        # The parsers read nvidia-smi's English, unlocalised answers.
        return module.run_command(argv, environ_update={"LC_ALL": "C", "LANG": "C"})

    facts = gather(run, _read_file, nvidia_smi, module.params["proc_driver_version_path"], modinfo,
                   proc_cmdline_path=module.params["proc_cmdline_path"],
                   sys_class_iommu_path=module.params["sys_class_iommu_path"], list_dir=_list_dir)
    module.exit_json(changed=False, ansible_facts={"gpu": facts})


if __name__ == "__main__":
    main()
