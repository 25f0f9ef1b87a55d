# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: requirement_hashes
short_description: The sha256 hashes a requirements lock gives for one pinned release
version_added: 0.1.0
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
description:
  - Reads a requirements file with hashes, as C(pip-compile --generate-hashes) or
    C(uv pip compile --generate-hashes) write it (continuation lines, comments), and returns the
    C(--hash=sha256:...) values of the line that pins O(name)==O(version).
  - Names are compared as pip compares them (case, C(-), C(_) and C(.) alike). An empty list means
    the file does not pin that release, or pins it without a hash.
  - The sglang_install role reads uv's hashes from C(sglang_install_requirements_lock) with it, so
    that the installer that enforces the lock is itself checked.
options:
  _input:
    description: The text of the requirements file.
    type: str
    required: true
  name:
    description: The distribution's name.
    type: str
    required: true
  version:
    description: The exact version pinned.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: The hashes the lock gives uv
  ansible.builtin.set_fact:
    uv_hashes: "{{ sglang_install_requirements_lock | blackwell.sglang.requirement_hashes('uv', '0.13.9') }}"
"""

RETURN = r"""
_value:
  description: The sha256 digests, lower case, in the file's order.
  type: list
  elements: str
"""


def requirement_hashes(text, name, version):
    # Imported here, not above: see tests/unit/test_filter_imports.py.
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.requirements import pinned_hashes
    return pinned_hashes(str(text or ""), str(name), str(version))


class FilterModule(object):
    def filters(self):
        return {"requirement_hashes": requirement_hashes}
