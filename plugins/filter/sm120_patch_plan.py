# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: sm120_patch_plan
short_description: What the sglang_sm120_patch role does on a node, decided from its reads
version_added: 0.1.0
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
description:
  - The plan of the role C(blackwell.sglang.sglang_sm120_patch), from what
    M(blackwell.sglang.sglang_venv_info) read in the venv, the node's GPU facts and the role's
    settings. It holds the problems that stop the host, the steps to take with a reason each,
    the capability majors to patch for, and what there is nothing to patch for.
  - Pure Python (plugins/plugin_utils/patch_plan.py), unit-tested over recorded reads.
options:
  _input:
    description: The result of M(blackwell.sglang.sglang_venv_info) for the venv.
    type: dict
    required: true
  gpu:
    description: The node's C(ansible_facts.gpu) from M(blackwell.sglang.gpu_facts); null when not gathered.
    type: dict
    required: true
  settings:
    description:
      - The role's settings without their prefix C(sglang_sm120_patch_) (C(venv), C(capabilities),
        C(source_capability), C(min_capability), C(missing_policy), C(state)); one left out
        takes the role's default.
    type: dict
    required: true
  check_mode:
    description: Whether the run is a check; a check of a venv without SGLang is not refused.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Plan the patch
  ansible.builtin.set_fact:
    patch_plan: >-
      {{ venv_read | blackwell.sglang.sm120_patch_plan(ansible_facts.gpu | default(None),
         {'venv': '/opt/sglang/current', 'capabilities': [12]}, ansible_check_mode) }}
"""

RETURN = r"""
_value:
  description: The plan.
  type: dict
  contains:
    problems:
      description: Why the host must stop before anything changes; empty to go on.
      type: list
      elements: str
    steps:
      description: The steps to take, each with C(name) (C(patch)) and C(reason).
      type: list
      elements: dict
    majors:
      description: The capability majors the C(patch) step runs M(blackwell.sglang.sglang_capmap) for.
      type: list
      elements: int
    notes:
      description: What there is nothing to patch for, one line each.
      type: list
      elements: str
    package:
      description: The sglang package directory; empty without SGLang.
      type: str
    release:
      description: The installed SGLang release, C(unknown) without one.
      type: str
"""


def sm120_patch_plan(venv_info, gpu, settings, check_mode=False):
    # Imported here, not above: see tests/unit/test_filter_imports.py.
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.patch_plan import plan
    return plan(venv_info or {}, gpu, settings or {}, bool(check_mode))


class FilterModule(object):
    def filters(self):
        return {"sm120_patch_plan": sm120_patch_plan}
