# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: rollout_slicing
short_description: Whether this run is one slice of a sliced AWX job, and the batches it may take
version_added: 0.1.0
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
description:
  - AWX and the Automation Platform's controller can slice a job template into jobs that run side by
    side, each on part of the inventory. A slice would keep the rollout's fleet-wide promises for
    its own hosts only (at most C(sglang_rollout_serial) nodes out at once, a failed node stops the
    rollout, the router and the Prometheus targets list every engine).
  - AWX passes a playbook no slice number or count. A job is taken for a slice when AWX's meta
    variables show it was started by a workflow job named after its own job template
    (C(awx_job_launch_type) is C(workflow) and C(awx_workflow_job_name) equals
    C(awx_job_template_name)), as AWX starts each slice, or when the site states a slice count above
    1 (C(sglang_rollout_slice_count)); a stated count decides, so C(1) says the job is not sliced.
  - A check (C(--check)) may be sliced. A sliced converge is refused unless
    C(sglang_rollout_allow_sliced) is true and C(sglang_rollout_slice_count) is given; each slice then
    takes batches of C(sglang_rollout_serial) divided by the count, rounded down, and a serial smaller
    than the count is refused. In a sliced run the router's and the Prometheus plays are left out.
  - Reads the extra vars only, as Ansible sizes a play's batches before it reads the inventory, and
    whether the run is a check; runs on the controller and reads nothing from the nodes. The decision
    is C(plugins/plugin_utils/rollout_slicing.py).
  - A sliced check notes, for the drift report, what the slice leaves out for a host; given what the
    host sees of the fleet (O(router_urls), O(routers), O(targets_path)), the note is empty where
    the slice leaves out nothing for it (no router in front of it or in the slice, no Prometheus
    targets the run writes), and a merged report of the slices then equals one job's.
options:
  router_urls:
    description: The host's C(sglang_service_router_urls), the routers it runs behind.
    type: list
    elements: str
  routers:
    description: The hosts of the group C(sglang_router) in the run's inventory.
    type: list
    elements: str
  targets_path:
    description: C(sglang_prometheus_sd_path), where the run writes the fleet's Prometheus targets.
    type: str
notes:
  - A workflow of the site's own named after its job template reads as a slice; a slice relaunched
    alone reads as a job of its own (it runs beside no other slice).
seealso:
  - plugin: blackwell.sglang.setting_problems
    plugin_type: lookup
"""

EXAMPLES = r"""
- name: Refuse a sliced converge before any node changes
  ansible.builtin.fail:
    msg: "{{ __slicing.problems | join(' ') }}"
  when: __slicing.problems | length > 0
  vars:
    __slicing: "{{ query('blackwell.sglang.rollout_slicing') | first }}"
"""

RETURN = r"""
_raw:
  description: One mapping.
  type: list
  elements: dict
  contains:
    sliced:
      description: This run is one slice of a sliced job.
      type: bool
    serial:
      description:
        - The node play's batch size for a converge, C(sglang_rollout_serial) as given (default 1) or
          this slice's share of it.
      type: raw
      sample: 2
    note:
      description: What a sliced run leaves out, for the drift report's notes; empty when not sliced.
      type: str
    problems:
      description: The refusals, each a sentence starting C(preflight:); empty when the run may go on.
      type: list
      elements: str
"""

from ansible.plugins.lookup import LookupBase
from ansible.utils.vars import load_extra_vars

from ansible_collections.blackwell.sglang.plugins.plugin_utils.rollout_slicing import leaves_out, plan


class LookupModule(LookupBase):

    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        # The extra vars, not the host's variables: the node play's serial is templated before any
        # inventory variable is read, and this decision must be the one its batches follow. What
        # the host sees of the fleet only says whether a sliced check leaves anything out for it.
        told = {name: kwargs[name] for name in ("router_urls", "routers", "targets_path") if name in kwargs}
        return [plan(load_extra_vars(self._loader), bool((variables or {}).get("ansible_check_mode", False)),
                     left_out=leaves_out(**told) if told else True)]
