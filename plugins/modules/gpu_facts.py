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
              type: list
              elements: dict
              sample: [{"gpu_a": 0, "gpu_b": 1, "link": "NV18", "type": "nvlink"}]
            summary:
              description:
                - C(nvlink_all) or C(pcie_only) when every pair is linked that way, C(mixed) when
                  the pairs differ or a link code is outside the legend, C(single) for one GPU,
                  C(none) for no GPU or a topology nvidia-smi did not give.
              type: str
              sample: pcie_only
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


def main():
    module = AnsibleModule(
        argument_spec=dict(
            nvidia_smi=dict(type="path"),
            proc_driver_version_path=dict(type="path", default="/proc/driver/nvidia/version"),
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

    facts = gather(run, _read_file, nvidia_smi, module.params["proc_driver_version_path"], modinfo)
    module.exit_json(changed=False, ansible_facts={"gpu": facts})


if __name__ == "__main__":
    main()
