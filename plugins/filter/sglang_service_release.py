# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: sglang_service_release
short_description: What the installed SGLang release is launched with, and what stops the host
version_added: 0.1.0
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
description:
  - The first stage of the plan of the role C(blackwell.sglang.sglang_service), from what
    M(blackwell.sglang.sglang_venv_info) read of the release's venv (its server flags, the
    active-release link, the TP record) and the role's settings.
  - It spells the launch arguments and the service environment, decides FlashInfer fusion
    against the node's GPUs and the release's flags and the PCIe IPC all-reduce against the
    topology, and lists the problems that stop the host before anything is written, each naming
    its setting.
  - Pure Python (plugins/plugin_utils/service_plan.py), unit-tested.
options:
  _input:
    description: The result of M(blackwell.sglang.sglang_venv_info) with O(blackwell.sglang.sglang_venv_info#module:server_flags=true).
    type: dict
    required: true
  inputs:
    description: The role's settings without their prefix C(sglang_service_), and the paths and values the role derives from them.
    type: dict
    required: true
  setting_problems:
    description: What the lookup C(blackwell.sglang.setting_problems) found wrong with the settings.
    type: list
    elements: str
    default: []
  check_mode:
    description: Whether the run is a check (a release that cannot be read is then the install's drift, not a problem).
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Decide what the release is launched with
  ansible.builtin.set_fact:
    release: "{{ read | blackwell.sglang.sglang_service_release(inputs, [], ansible_check_mode) }}"
"""

RETURN = r"""
_value:
  description: What the release is launched with.
  type: dict
  contains:
    readable:
      description: Whether the release's flags could be read.
      type: bool
    version:
      description: The SGLang release.
      type: str
    problems:
      description: Why the host must stop before anything changes, one clause per problem; empty to go on.
      type: list
      elements: str
    args:
      description: The launch_server arguments, one argv word each.
      type: list
      elements: str
    environment:
      description: The service's environment (the settings', NCCL's, the sandbox's and the PCIe all-reduce's).
      type: dict
    tp_size:
      description: The tensor parallel size.
      type: int
    tp_record:
      description: The TP record's text (the size and a line break).
      type: str
    tp_before:
      description: The TP size the unit was last deployed with (0 when none is recorded).
      type: int
    gpu_majors:
      description: The GPUs' compute capability majors.
      type: list
    fusion:
      description: >-
        C(crash) (this release's fusion raises on these GPUs), C(enabled) (fusion is launched) and
        C(left_out) (left out under the crash policy warn).
      type: dict
    pcie_ipc_allreduce:
      description: Whether the PCIe IPC all-reduce is switched on.
      type: bool
    health_host:
      description: Where the role reaches the server (loopback when it listens on every address).
      type: str
    nccl_majors:
      description: The compute capability majors the NCCL version is judged against (none under the policy ignore).
      type: list
"""


def sglang_service_release(read, inputs, setting_problems=None, check_mode=False):
    # Imported here, not above: see tests/unit/test_filter_imports.py.
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.service_plan import release
    return release(read or {}, inputs or {}, setting_problems or [], bool(check_mode))


class FilterModule(object):
    def filters(self):
        return {"sglang_service_release": sglang_service_release}
