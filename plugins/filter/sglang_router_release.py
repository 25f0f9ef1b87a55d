# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: sglang_router_release
short_description: The sglang_router role's worker list, launch arguments and refusals
version_added: 0.1.0
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
description:
  - The router's workers from the inventory (each host of the group that serves the model, at
    the address and port its engine listens on), its launch arguments (never its key) and
    every problem that stops the host before anything changes.
  - Pure Python (plugins/plugin_utils/router_plan.py), unit-tested.
options:
  _input:
    description: The role's settings without their prefix, as vars/main.yml gathers them.
    type: dict
    required: true
  hostvars:
    description: The inventory's host variables.
    type: dict
    required: true
  names:
    description: The hosts that serve the model (sglang_router_workers).
    type: list
    elements: str
    required: true
  router_host:
    description: The host the router runs on.
    type: str
    required: true
  inventory_hosts:
    description: Every host of the inventory.
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
- name: Spell the router's arguments
  ansible.builtin.set_fact:
    release: "{{ inputs | blackwell.sglang.sglang_router_release(hostvars, workers, inventory_hostname, groups['all']) }}"
"""

RETURN = r"""
_value:
  description: C(args) (argv words), C(workers) (the worker URLs) and C(problems).
  type: dict
"""


def sglang_router_release(inputs, hostvars, names, router_host, inventory_hosts):
    # Imported here, not above: see tests/unit/test_filter_imports.py.
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.router_plan import release, workers
    return release(inputs or {}, workers(hostvars or {}, list(names or []), router_host, list(inventory_hosts or [])))


class FilterModule(object):
    def filters(self):
        return {"sglang_router_release": sglang_router_release}
