# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: drift_verdicts
short_description: The drift report's verdicts so far, one key per host, for set_stats
version_added: 0.1.0
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
description:
  - What the callback C(blackwell.sglang.drift_report) of this C(ansible-playbook) run has found so
    far, host by host, as C(ansible.builtin.set_stats) data, so that ansible-runner and AWX keep the
    verdicts as the job's artifacts.
  - One key per host, C(blackwell_sglang_drift_) and the host's name with every character but an
    ASCII letter or digit written as C(_) and its code in hex (C(gpu-01) is
    C(blackwell_sglang_drift_gpu_2d01)). AWX merges the artifacts of a workflow's jobs key by key, so
    the slices of a sliced job template never overwrite each other's hosts.
  - Each value is the host's verdict as the report's JSON holds it (C(status), C(reason), C(drift),
    C(not_judged), C(failures), C(handlers_that_would_run), C(notes)), with C(host) (its name) and
    C(check_mode) (whether the run was a check).
  - Read in the run's last play (C(blackwell.sglang.publish), which C(blackwell.sglang.site) ends
    with), before Ansible prints the recap. O(alive) names the hosts still in the run there
    (C(ansible_play_hosts)); a host the callback saw fail is failed unless it is among them (a
    rescue handled its failure), as the recap will count it.
  - An empty mapping where the callback is not enabled in this run.
options:
  alive:
    description:
      - The hosts still in the run, C(ansible_play_hosts) of the play that publishes.
      - Without it, a host is failed where its last result was a failure nothing handled.
    type: list
    elements: str
notes:
  - The callback's state is read in the process the lookup runs in, forked by Ansible from the one
    the callback runs in (a task's worker, or the controller itself templating a play's C(hosts));
    it holds every result handled before then.
seealso:
  - plugin: blackwell.sglang.drift_report
    plugin_type: callback
"""

EXAMPLES = r"""
- name: Publish the drift verdicts as the job's artifacts
  ansible.builtin.set_stats:
    data: "{{ lookup('blackwell.sglang.drift_verdicts') }}"
"""

RETURN = r"""
_raw:
  description: One mapping, artifact key to the host's verdict; empty without the callback.
  type: list
  elements: dict
"""

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.blackwell.sglang.plugins.plugin_utils import drift


class LookupModule(LookupBase):

    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        if terms:
            raise AnsibleLookupError(f"blackwell.sglang.drift_verdicts takes no term, got {list(terms)!r}")
        alive = self.get_option("alive")
        return [drift.running_artifacts(None if alive is None else set(alive))]
