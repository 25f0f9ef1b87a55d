# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: sglang_router_worker_view
short_description: The router's workers as it lists them, against the list it should hold
version_added: 0.1.0
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
description:
  - Compares the router's C(GET /workers) reply with the worker list the sglang_router role
    derives from the inventory.
  - A worker the router does not list, and one it lists that no host of the group serves at,
    is drift with its reason; each worker's state in the router (healthy, unhealthy, removed)
    is a note for the drift report.
  - Pure Python (plugins/plugin_utils/router_plan.py), unit-tested.
options:
  _input:
    description: The router's C(GET /workers) reply as M(ansible.builtin.uri) registers it.
    type: dict
    required: true
  expected:
    description: The worker URLs the router should hold.
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
- name: Compare the router's workers with the inventory's
  ansible.builtin.set_fact:
    view: "{{ workers_answer | blackwell.sglang.sglang_router_worker_view(release.workers) }}"
"""

RETURN = r"""
_value:
  description: >-
    C(read) (the router answered with its list), C(missing) (URLs), C(extra) (URL and id each),
    C(healthy) and C(unhealthy) (URLs listed, by the router's health checks), C(drift) and
    C(notes) (one line each).
  type: dict
"""


def sglang_router_worker_view(answer, expected):
    # Imported here, not above: see tests/unit/test_filter_imports.py.
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.router_plan import worker_view
    return worker_view(list(expected or []), answer or {})


class FilterModule(object):
    def filters(self):
        return {"sglang_router_worker_view": sglang_router_worker_view}
