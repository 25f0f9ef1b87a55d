# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: sglang_router_views
short_description: Each router's view of one engine node
version_added: 0.1.0
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
description:
  - Reads the C(GET /workers) answers of every router in front of the fleet (a uri task looped
    over C(sglang_service_router_urls)) against one node's worker URL.
  - Each router gives its URL, the HTTP status of its answer (-1 where it did not answer), its
    view of the node (the filter C(blackwell.sglang.sglang_router_worker_view)'s, URLs compared normalised)
    and a line for the drift report.
  - Pure Python (plugins/plugin_utils/router_plan.py), unit-tested.
options:
  _input:
    description: The looped uri task's C(results), each with its C(item) (the router's URL).
    type: list
    elements: dict
    required: true
  worker:
    description: The node's worker URL (the filter C(blackwell.sglang.sglang_router_worker_url)).
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Each router's view of this node
  ansible.builtin.set_fact:
    views: "{{ read.results | blackwell.sglang.sglang_router_views(worker_url) }}"
"""

RETURN = r"""
_value:
  description: One entry per router read, C(url), C(status), C(view) and C(note).
  type: list
  elements: dict
"""


def sglang_router_views(answers, worker):
    # Imported here, not above: see tests/unit/test_filter_imports.py.
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.router_plan import views
    return views(list(answers or []), worker)


class FilterModule(object):
    def filters(self):
        return {"sglang_router_views": sglang_router_views}
