# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: removal_paths
short_description: The paths a role's removal takes away, from its table of managed paths
version_added: 0.1.0
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
description:
  - Takes a role's table (its rows in the collection's one schema, checked first) and returns the
    path of every row, in force or not, but for the paths a row keeps (C(keep), or C(removal)
    set to V(keep); a path one row keeps is kept whatever another row says) and the rows without
    a path.
  - The last row comes first; a path two rows name is returned once, and a path under another
    path returned is left out, since it goes with that one.
options:
  _input:
    description: The role's rows, as its C(vars/main.yml) declares them.
    type: list
    elements: dict
    required: true
  role:
    description: The role the table is of, named in the error a row off the schema raises.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Remove everything the role wrote
  ansible.builtin.file:
    path: "{{ item }}"
    state: absent
  loop: "{{ __sglang_service_files | blackwell.sglang.removal_paths('sglang_service') }}"
"""

RETURN = r"""
_value:
  description: The paths to remove, in the order to remove them.
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError


def removal_paths(rows, role):
    # Imported here, not above: see tests/unit/test_filter_imports.py.
    from ansible_collections.blackwell.sglang.plugins.plugin_utils import managed
    try:
        return managed.removal(str(role), list(rows or []))
    except ValueError as error:
        raise AnsibleFilterError(str(error)) from error


class FilterModule(object):
    def filters(self):
        return {"removal_paths": removal_paths}
