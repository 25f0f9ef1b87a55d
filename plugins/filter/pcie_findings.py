# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: pcie_findings
short_description: What on a node would slow down or hang tensor parallelism over PCIe
version_added: 0.1.0
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
description:
  - Reads the facts M(blackwell.sglang.gpu_facts) sets and lists what is wrong for tensor
    parallelism across the node's GPUs, each finding naming the GPUs, the likely cause and the
    fix.
  - C(p2p) a pair of GPUs that tensor parallelism spans cannot read or write peer to peer;
    C(link) a GPU's PCIe link runs below its maximum generation or width; C(persistence)
    persistence mode is off; C(iommu) the IOMMU translates device traffic (not passthrough)
    while the GPUs talk over PCIe only.
  - Nothing is found on nodes without GPUs, with one GPU, or with a tensor parallel size of 1;
    values the facts leave null (an older driver) are not findings.
options:
  _input:
    description: The gpu facts, C(ansible_facts.gpu).
    type: dict
    required: true
  tp_size:
    description:
      - Tensor parallel size; it spans the GPUs with the lowest indices, as SGLang places its
        ranks from GPU 0 upwards.
      - Null means every GPU of the node.
    type: int
  warn:
    description:
      - Also emit each finding as a warning of the task that uses the filter, prefixed with
        C(hardware:), which is how the drift report recognises it.
    type: bool
    default: false
seealso:
  - module: blackwell.sglang.gpu_facts
"""

EXAMPLES = r"""
- name: Warn about what would slow down tensor parallelism over PCIe
  ansible.builtin.debug:
    msg: "{{ ansible_facts.gpu | blackwell.sglang.pcie_findings(tp_size=4, warn=true) | map(attribute='message') }}"

- name: Refuse a node whose GPUs cannot reach each other peer to peer
  ansible.builtin.assert:
    that: ansible_facts.gpu | blackwell.sglang.pcie_findings | selectattr('check', 'equalto', 'p2p') | list | length == 0
"""

RETURN = r"""
_value:
  description: One entry per kind of problem found, in the order p2p, link, persistence, iommu.
  type: list
  elements: dict
  contains:
    check:
      description: C(p2p), C(link), C(persistence) or C(iommu).
      type: str
      sample: persistence
    gpus:
      description: Indices of the GPUs concerned.
      type: list
      elements: int
      sample: [6, 7]
    message:
      description: The GPUs, the likely cause and the fix, in one sentence or a few.
      type: str
      sample: >-
        GPU6, GPU7: persistence mode is off, so the driver tears these GPUs down whenever no
        process holds them and initialises them again at every start of the server ...
"""

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.text.converters import to_native
from ansible.utils.display import Display

WARNING_PREFIX = "hardware: "


def pcie_findings(facts, tp_size=None, warn=False):
    # Imported here, not above: see tests/unit/test_filter_imports.py.
    from ansible_collections.blackwell.sglang.plugins.module_utils.gpu import pcie_findings as _pcie_findings
    if not isinstance(facts, dict):
        raise AnsibleFilterError("pcie_findings: expects the gpu facts (a dict), got %s" % type(facts).__name__)
    if tp_size is not None:
        text = str(tp_size).strip()
        if isinstance(tp_size, bool) or not text.isdigit() or int(text) < 1:
            raise AnsibleFilterError("pcie_findings: tp_size must be a positive whole number or null, got %r" % (tp_size,))
        tp_size = int(text)
    try:
        findings = _pcie_findings(facts, tp_size)
    except (KeyError, TypeError, ValueError) as exc:
        raise AnsibleFilterError("pcie_findings: these are not gpu facts: %s" % to_native(exc))
    if warn:
        # Inside a task, ansible-core records a warning with that task's result, where the
        # drift report's callback reads it.
        display = Display()
        for finding in findings:
            display.warning(WARNING_PREFIX + finding["message"])
    return findings


class FilterModule(object):
    def filters(self):
        return {"pcie_findings": pcie_findings}
