# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: release_name
short_description: The directory name of an SGLang release, which changes with what the installer is asked for
version_added: 0.1.0
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
description:
  - Returns the version alone for the plain request (C(sglang==<version>) without extras, extra
    packages, constraints, a lock or overrides), so a node installed that way keeps its release directory.
  - Any other request names C(<version>-<digest>), the first 10 hex digits of the sha256 of the
    request. A changed request for an installed version is therefore installed into a directory
    of its own beside the running release and switched to behind the health gate, never
    installed inside the release that serves.
  - The request is taken as the request files are written (the lists in their order, the lock
    without its surrounding whitespace), so whatever rewrites them names another directory.
    Installer options (sources, C(no_deps), the installer itself) are not part of the request.
options:
  _input:
    description: The SGLang version (C(sglang_install_version)).
    type: str
    required: true
  extras:
    description: C(sglang_install_extras).
    type: list
    elements: str
    required: true
  extra_packages:
    description: C(sglang_install_extra_packages).
    type: list
    elements: str
    required: true
  constraints:
    description: C(sglang_install_constraints).
    type: list
    elements: str
    required: true
  lock:
    description: C(sglang_install_requirements_lock); empty when none.
    type: str
    required: true
  overrides:
    description:
      - The installer's overrides (the lines of the filter C(blackwell.sglang.nccl_overrides)).
        An empty list names the release as a request without overrides.
    type: list
    elements: str
    default: []
"""

EXAMPLES = r"""
- name: The release directory of sglang[all]==0.5.23
  ansible.builtin.debug:
    msg: "/opt/sglang/releases/{{ '0.5.23' | blackwell.sglang.release_name(['all'], [], [], '') }}"
"""

RETURN = r"""
_value:
  description: The version, or the version and the request's digest joined by C(-).
  type: str
  sample: 0.5.23-3f9a1c0b7e
"""


def release_name(version, extras, extra_packages, constraints, lock, overrides=None):
    # Imported here, not above: see tests/unit/test_filter_imports.py.
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.releases import release_name as _release_name
    return _release_name(str(version), list(extras or []), list(extra_packages or []), list(constraints or []), str(lock or ""),
                         list(overrides or []))


class FilterModule(object):
    def filters(self):
        return {"release_name": release_name}
