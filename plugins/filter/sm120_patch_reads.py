# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: sm120_patch_reads
short_description: Which reads the sglang_sm120_patch role takes itself
version_added: 0.1.0
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
description:
  - The role C(blackwell.sglang.sglang_sm120_patch) reads the venv unless the play passed a read of
    the same venv (C(sglang_sm120_patch_venv_info)), and gathers the GPU facts unless
    capabilities are set or the play has the facts and gathering is off.
  - Pure Python (plugins/plugin_utils/patch_plan.py), unit-tested.
options:
  _input:
    description: The role's settings without their prefix C(sglang_sm120_patch_) (C(venv), C(capabilities)).
    type: dict
    required: true
  venv_info:
    description: The read of the venv the play passed (empty when none).
    type: dict
    required: true
  gpu_facts_known:
    description: Whether the node's C(gpu) facts are defined.
    type: bool
    required: true
  gather:
    description: C(sglang_sm120_patch_gpu_facts_gather).
    type: bool
    required: true
"""

EXAMPLES = r"""
- name: Read the venv where the play has not
  ansible.builtin.include_tasks: read.yml
  when: reads.venv or reads.gpus
  vars:
    reads: "{{ settings | blackwell.sglang.sm120_patch_reads(sglang_sm120_patch_venv_info, ansible_facts.gpu is defined, true) }}"
"""

RETURN = r"""
_value:
  description: C(venv) (read the venv) and C(gpus) (gather the GPU facts).
  type: dict
"""


def sm120_patch_reads(settings, venv_info, gpu_facts_known, gather):
    # Imported here, not above: see tests/unit/test_filter_imports.py.
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.patch_plan import reads
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.settings import truthy
    return reads(settings or {}, venv_info or {}, bool(gpu_facts_known), truthy(gather))


class FilterModule(object):
    def filters(self):
        return {"sm120_patch_reads": sm120_patch_reads}
