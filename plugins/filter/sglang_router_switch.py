# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: sglang_router_switch
short_description: The router's files a converge would switch, each with its reason
version_added: 0.1.0
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
description:
  - The rows of the sglang_router role's table whose change restarts the router (its secrets
    file, launcher and unit) that the node holds otherwise than the rows say, in table order.
  - The role keeps the node's copies of those files before it writes them (the rollback record,
    M(blackwell.sglang.sglang_rollback)), so that a router that fails its gate goes back to what it
    ran before.
  - Pure Python (plugins/plugin_utils/router_plan.py), unit-tested.
options:
  _input:
    description: The role's read of the node (M(blackwell.sglang.sglang_venv_info) with C(paths)).
    type: dict
    required: true
  files:
    description: The role's table (vars/main.yml's C(__sglang_router_files)).
    type: list
    elements: dict
    required: true
  contents:
    description: Each file's text, by the template or source name its row gives.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Decide what this run switches
  ansible.builtin.set_fact:
    switching: "{{ router_read | blackwell.sglang.sglang_router_switch(__sglang_router_files, rendered) }}"
"""

RETURN = r"""
_value:
  description: One C(path) and C(reason) for each file the run would write; empty when none.
  type: list
  elements: dict
"""


def sglang_router_switch(read, files, contents):
    # Imported here, not above: see tests/unit/test_filter_imports.py.
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.router_plan import switch
    return switch(read or {}, list(files or []), dict(contents or {}))


class FilterModule(object):
    def filters(self):
        return {"sglang_router_switch": sglang_router_switch}
