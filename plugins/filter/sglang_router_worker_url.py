# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: sglang_router_worker_url
short_description: The URL SGLang's router reaches a node's engine at
version_added: 0.1.0
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
description:
  - The worker URL of one engine node, as the role C(blackwell.sglang.sglang_router) lists it
    - its C(sglang_router_worker_address), else the one address its engine listens on, else its
    C(ansible_host), else its name, with its C(sglang_service_port). sglang_service drains and
    puts back the node under this URL.
  - Pure Python (plugins/plugin_utils/router_plan.py), unit-tested.
options:
  _input:
    description: The node's host variables.
    type: dict
    required: true
  name:
    description: The node's inventory name.
    type: str
    required: true
  router_host:
    description: The host the router runs on (an engine on loopback is reached there only).
    type: str
    default: ""
"""

EXAMPLES = r"""
- name: The URL the router knows this node by
  ansible.builtin.debug:
    msg: "{{ hostvars[inventory_hostname] | blackwell.sglang.sglang_router_worker_url(inventory_hostname) }}"
"""

RETURN = r"""
_value:
  description: The worker URL, http://<address>:<port>.
  type: str
"""


def sglang_router_worker_url(found, name, router_host=""):
    # Imported here, not above: see tests/unit/test_filter_imports.py.
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.router_plan import worker_url
    return worker_url(found or {}, name, router_host or None)


class FilterModule(object):
    def filters(self):
        return {"sglang_router_worker_url": sglang_router_worker_url}
