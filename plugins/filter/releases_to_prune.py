# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: releases_to_prune
short_description: The release directories a prune removes, sparing every release in use
version_added: 0.1.0
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
description:
  - Takes the releases C(blackwell.sglang.sglang_venv_info) lists (newest first) and returns the
    paths to remove so that O(keep) releases stay, counting the one installed and the one the
    active-release link points at, which always stay; the newest of the others fill the rest.
  - Whatever the count, a release a running process runs from (C(running)) and the one the
    rollback record of an unfinished rollout names (C(rollback_target)) are never returned.
  - Releases are told apart by directory name, so a trailing slash changes nothing.
options:
  _input:
    description: The releases, as RV(blackwell.sglang.sglang_venv_info#module:releases) lists them.
    type: list
    elements: dict
    required: true
  keep:
    description: How many releases stay, counting the installed and the active one.
    type: int
    required: true
  installed:
    description: The release directory this run installs.
    type: str
    required: true
  active:
    description: The release the active-release link points at; empty when there is no link.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Remove the releases beyond two
  ansible.builtin.file:
    path: "{{ item }}"
    state: absent
  loop: "{{ info.releases | blackwell.sglang.releases_to_prune(2, '/opt/sglang/releases/0.5.23', info.paths['/opt/sglang/current'].link) }}"
"""

RETURN = r"""
_value:
  description: The paths of the releases to remove, newest first.
  type: list
  elements: str
"""


def releases_to_prune(found, keep, installed, active):
    # Imported here, not above: see tests/unit/test_filter_imports.py.
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.releases import to_prune
    return to_prune(list(found or []), int(keep), str(installed or ""), str(active or ""))


class FilterModule(object):
    def filters(self):
        return {"releases_to_prune": releases_to_prune}
