# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: cuda13_repository
short_description: The node's CUDA repository, and what stops the cuda13 role before it reads the node
version_added: 0.1.0
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
description:
  - The addresses of NVIDIA's CUDA repository for the node (distribution path, architecture,
    sources and legacy list paths, the signing key's URL) from its facts and the role
    C(blackwell.sglang.cuda13)'s settings, and the problems that stop the host before the node's
    CUDA state or the key is read - a distribution or architecture NVIDIA publishes no
    repository for, a fingerprint that cannot match any key, a driver below the floor or the
    proprietary kernel module on compute capability 12.x.
  - Pure Python (plugins/plugin_utils/cuda_plan.py), unit-tested.
options:
  _input:
    description: The node's C(ansible_facts) (C(distribution), C(distribution_version), C(distribution_major_version), C(architecture)).
    type: dict
    required: true
  gpu:
    description: The node's C(ansible_facts.gpu) from M(blackwell.sglang.gpu_facts); null when not gathered.
    type: dict
    required: true
  inputs:
    description:
      - The role's settings without their prefix C(cuda13_), and the role's data (C(repositories),
        each repository path with its C(key_file) and C(fingerprint); C(repo_arches),
        C(previous_toolkit_pattern), C(nvcc_release), C(prerequisites)), as the role's
        vars/main.yml gathers them.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Refuse a node NVIDIA publishes no repository for
  ansible.builtin.fail:
    msg: "{{ repo.problems | join(' ') }}"
  when: repo.problems | length > 0
  vars:
    repo: "{{ ansible_facts | blackwell.sglang.cuda13_repository(ansible_facts.gpu | default(None), cuda13_inputs) }}"
"""

RETURN = r"""
_value:
  description: The repository's addresses and the problems.
  type: dict
  contains:
    distro:
      description: NVIDIA's name of the distribution (C(debian12), C(ubuntu2404)); empty when it publishes none.
      type: str
    arch:
      description: NVIDIA's name of the architecture (C(x86_64), C(sbsa)); empty when it publishes none.
      type: str
    name:
      description: The repository's name, C(cuda-<distro>-<arch>).
      type: str
    url:
      description: The repository's URL.
      type: str
    key_url:
      description: Where the signing key is read from when it is not given as content.
      type: str
    key_from_node:
      description: Whether the key is a C(file://) path read on the node itself.
      type: bool
    key_source:
      description: Where the key comes from, as refusals name it.
      type: str
    fingerprint:
      description: The expected fingerprint, upper case without spaces.
      type: str
    legacy_list:
      description: The sources list C(cuda-keyring) installs.
      type: str
    sources:
      description: The deb822 sources file the role writes.
      type: str
    problems:
      description: Why the host must stop before anything is read; empty to go on.
      type: list
      elements: str
"""


def cuda13_repository(facts, gpu, inputs):
    # Imported here, not above: see tests/unit/test_filter_imports.py.
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.cuda_plan import repository
    return repository(facts or {}, gpu, inputs or {})


class FilterModule(object):
    def filters(self):
        return {"cuda13_repository": cuda13_repository}
