# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: nccl_overrides
short_description: The installer overrides that lift torch's exact NCCL pin to a floor on compute capability 12
version_added: 0.1.0
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
description:
  - torch pins its NCCL wheel exactly (torch 2.14.1, which SGLang 0.5.23 pins, requires
    C(nvidia-nccl-cu13==2.30.7)). NCCL before 2.31.2 hits an illegal memory access on compute
    capability 12 GPUs (RTX PRO 6000 Blackwell and kin) at all-reduce sizes of 512 KiB and
    above (NVIDIA/nccl issue 2418, fixed in 2.31.2).
  - Returns the override lines for uv's C(--override) that let the install take NCCL at or above
    the floor instead, as C(<package>>=<floor>) (or a lock's own line for the package); an empty
    list where the floor does not apply.
  - The policy (the input) C(auto) applies it where the node's GPUs include compute capability
    12, C(always) everywhere, C(never) nowhere. An install without dependencies
    (O(no_deps)) resolves no pin, so nothing applies there.
  - Pure Python (plugins/plugin_utils/install_plan.py); the role C(blackwell.sglang.sglang_install)
    puts the lines in its request and its release's name.
options:
  _input:
    description: The policy (C(sglang_install_nccl_floor_policy)), one of C(auto), C(always), C(never).
    type: str
    required: true
  floor:
    description: The lowest NCCL release to install (C(sglang_install_nccl_floor)).
    type: str
    required: true
  package:
    description: The NCCL wheel torch depends on (C(sglang_install_nccl_package)).
    type: str
    required: true
  no_deps:
    description: Whether the install takes no dependencies (C(sglang_install_no_deps)).
    type: bool
    required: true
  capability_majors:
    description: The node's distinct compute capability majors, C(ansible_facts.gpu.capability_majors) as M(blackwell.sglang.gpu_facts) sets it.
    type: list
    elements: int
    required: true
  lock:
    description:
      - C(sglang_install_requirements_lock). Where it pins the package, its line, hashes included,
        is the override (uv's C(--require-hashes) asks an exact pin with hashes of an override too).
    type: str
    default: ""
"""

EXAMPLES = r"""
- name: The overrides of a node with RTX PRO 6000 Blackwell GPUs
  ansible.builtin.debug:
    msg: "{{ 'auto' | blackwell.sglang.nccl_overrides('2.31.2', 'nvidia-nccl-cu13', false, [12]) }}"
"""

RETURN = r"""
_value:
  description: The override lines; empty where the floor does not apply.
  type: list
  elements: str
  sample: [nvidia-nccl-cu13>=2.31.2]
"""


def nccl_overrides(policy, floor, package, no_deps, capability_majors, lock=""):
    # Imported here, not above: see tests/unit/test_filter_imports.py.
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.install_plan import nccl_overrides as _nccl_overrides
    return _nccl_overrides(str(policy), str(floor), str(package), no_deps, list(capability_majors or []), str(lock or ""))


class FilterModule(object):
    def filters(self):
        return {"nccl_overrides": nccl_overrides}
