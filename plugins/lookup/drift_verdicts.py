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
    with), before Ansible prints the recap; a host is failed where its last result was a failure
    that nothing handled, as the recap will count it.
  - An empty mapping where the callback is not enabled in this run.
  - With the term C(host), the name of the host the publishing play runs its one task on instead,
    the first host with a verdict that neither failed nor was unreachable, so that the play takes
    a host this run has reached within its C(--limit) (set_stats connects to no host); an empty
    string where there is none.
options:
  _terms:
    description: Nothing for the verdicts, or C(host).
    required: false
notes:
  - The callback's state is read in the worker Ansible forks for the task, which holds every result
    handled before the task started; no other process can read it.
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
  description:
    - One mapping, artifact key to the host's verdict; empty without the callback.
    - With the term C(host), one host name, or an empty string.
  type: list
  elements: raw
"""

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.blackwell.sglang.plugins.plugin_utils import drift


class LookupModule(LookupBase):

    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        if not terms:
            return [drift.running_artifacts()]
        if list(terms) == ["host"]:
            return [drift.running_host()]
        raise AnsibleLookupError(f"blackwell.sglang.drift_verdicts takes no term or 'host', got {list(terms)!r}")
