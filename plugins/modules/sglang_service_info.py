#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: sglang_service_info
short_description: Read the state of the SGLang systemd service, what it runs behind and its health
version_added: 0.1.0
description:
  - Reports, in one call, what a rollout decides on for a systemd service - whether the unit is
    loaded, active and enabled, whether systemd still has to reload it, when it last started, the
    drop-ins under C(/etc/systemd/system/<unit>.d/) and C(/run/systemd/system/<unit>.d/) that
    change it, which watched files changed after it started (so the running process does not
    have them yet), and the HTTP status of a health URL.
  - Read-only; the health request is a GET, so the module answers the same in check mode.
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
options:
  name:
    description:
      - The unit to read.
    type: str
    default: sglang.service
  watch:
    description:
      - Files (shell patterns allowed) the running service loads at start-up; those modified
        after its last start are reported in RV(newer_than_start).
    type: list
    elements: path
    default: []
  health_url:
    description:
      - A URL to GET when the service is active; its status code is reported in RV(health).
    type: str
  health_timeout:
    description:
      - Seconds to wait for the health URL to answer.
    type: int
    default: 5
  release_link:
    description:
      - The symbolic link to the active release's venv that the unit runs from (for example
        C(/opt/sglang/current)). Where it points now, and which release the main process runs
        (its interpreter's venv, from C(/proc/<pid>/cmdline)), are reported in RV(release).
    type: path
  loading_timeout:
    description:
      - Seconds an engine may take to load its model after its main process started (the health
        gate's timeout). With O(health_url), an active service that does not answer 200 yet is
        reported as C(loading) in RV(phase) while its last start is younger than this, and as
        C(unhealthy) after; the module then also warns how long it has been loading, and notes
        it for the drift report (the topic C(engine) of the fact C(blackwell_sglang_notes)).
      - Unset, any answer but 200 is C(unhealthy).
    type: int
  nccl_report:
    description:
      - A JSON file holding the report of the last NCCL all-reduce smoke test, as the role
        C(blackwell.sglang.sglang_service) writes it before a restart. It is returned as the
        fact C(sglang_service_nccl_smoke_report), and its line as the topic C(nccl_smoke) of the
        fact C(blackwell_sglang_notes), so that a check run and the drift report see the last
        measured bus bandwidth without running the test again.
    type: path
  nccl_capability_majors:
    description:
      - The compute capability majors of the node's GPUs. With O(nccl_report), the NCCL version
        the last smoke test reported is judged against them (before 2.31.2 on compute capability
        12, NVIDIA/nccl#2418), and a finding is noted as the topic C(nccl_version).
    type: list
    elements: int
    default: []
attributes:
  check_mode:
    support: full
    description: Reads only; behaves the same in check mode.
  diff_mode:
    support: none
    description: Changes nothing, so there is no diff.
"""

EXAMPLES = r"""
- name: Read the SGLang service
  blackwell.sglang.sglang_service_info:
    name: sglang.service
    watch:
      - /etc/systemd/system/sglang.service
      - /opt/sglang/current/lib/python3*/site-packages/sglang/srt/distributed/device_communicators/*.py
    health_url: http://127.0.0.1:30000/health
  register: sglang_state

- name: Say when the server runs older files than the node has
  ansible.builtin.debug:
    msg: "restart pending for {{ sglang_state.newer_than_start | join(', ') }}"
  when: sglang_state.newer_than_start | length > 0
"""

RETURN = r"""
name:
  description: The unit read (O(name)).
  returned: always
  type: str
  sample: sglang.service
exists:
  description: Whether systemd knows the unit (its C(LoadState) is not C(not-found)).
  returned: always
  type: bool
load_state:
  description: systemd's C(LoadState).
  returned: always
  type: str
  sample: loaded
active_state:
  description: systemd's C(ActiveState) (C(active), C(inactive), C(failed), ...).
  returned: always
  type: str
  sample: active
sub_state:
  description: systemd's C(SubState).
  returned: always
  type: str
  sample: running
unit_file_state:
  description: systemd's C(UnitFileState) (C(enabled), C(disabled), ...).
  returned: always
  type: str
  sample: enabled
need_daemon_reload:
  description: Whether the unit changed on disk since systemd last loaded it.
  returned: always
  type: bool
main_pid:
  description: The service's main process; 0 when none runs.
  returned: always
  type: int
started:
  description: The service's last start, in Unix seconds; null when it has not started since boot.
  returned: always
  type: int
  sample: 1764523020
dropins:
  description: Drop-in files under C(/etc/systemd/system/<unit>.d/) and C(/run/systemd/system/<unit>.d/).
  returned: always
  type: list
  elements: str
  sample: [/etc/systemd/system/sglang.service.d/override.conf]
newer_than_start:
  description: >-
    Watched files (O(watch)) modified after the service last started, while it is active: the
    running process does not have them.
  returned: always
  type: list
  elements: str
release:
  description: >-
    Where O(release_link) points and which release the main process runs; both resolved, and
    empty when unknown (no link, no process, a process not started from a venv).
  returned: when O(release_link) is set
  type: dict
  contains:
    linked:
      description: The directory the link resolves to.
      type: str
      sample: /opt/sglang/releases/0.5.23
    running:
      description: The venv the main process's interpreter belongs to.
      type: str
      sample: /opt/sglang/releases/0.5.8
ansible_facts:
  description: Facts this call sets.
  returned: when O(nccl_report) or O(health_url) is set
  type: dict
  contains:
    blackwell_sglang_notes:
      description: >-
        The notes the drift report shows beside the host's verdict - C(engine) (an engine still
        loading its model, with O(health_url); null otherwise), C(nccl_smoke) (the last smoke
        test's line, with O(nccl_report); null when it measured nothing) and C(nccl_version) (what
        is wrong with the NCCL it reported, on GPUs of O(nccl_capability_majors); null when nothing is).
      type: dict
      sample: {engine: null, nccl_smoke: "passed: 297.2 GB/s bus bandwidth over 2 GPUs"}
    sglang_service_nccl_smoke_report:
      description: >-
        The last NCCL smoke test's report read from O(nccl_report) (C(ran), C(passed), C(msg),
        C(busbw_gbps), C(world_size), ...); null when the file does not exist or is not a JSON
        object.
      type: dict
      sample: {ran: true, passed: true, busbw_gbps: 297.2, world_size: 2}
phase:
  description: >-
    What the engine is doing, when O(health_url) is set - C(stopped) (the unit is not active),
    C(healthy) (the health URL answered 200), C(loading) (not yet 200 or not listening yet,
    within O(loading_timeout) of its last start) or C(unhealthy) (not 200, and no longer within
    that time).
  returned: when O(health_url) is set
  type: str
  sample: loading
loading:
  description: For C(loading) only, how long the engine has been loading and how much of O(loading_timeout) is left.
  returned: when RV(phase) is C(loading)
  type: dict
  contains:
    elapsed:
      description: Seconds since the main process started.
      type: int
      sample: 42
    remaining:
      description: Seconds left of O(loading_timeout).
      type: int
      sample: 1158
health:
  description: The answer of O(health_url) while the service is active.
  returned: always
  type: dict
  contains:
    url:
      description: The URL asked; null when none was asked.
      type: str
    status:
      description: The HTTP status code; null when nothing answered or nothing was asked.
      type: int
      sample: 200
    error:
      description: Why nothing answered; null otherwise.
      type: str
"""

import glob
import json
import os
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.six.moves.urllib.error import HTTPError, URLError
from ansible.module_utils.urls import open_url
from ansible_collections.blackwell.sglang.plugins.module_utils import file_state, nccl
from ansible_collections.blackwell.sglang.plugins.module_utils.systemd_unit import PROPERTIES, engine_phase, parse_show, summarise


def _mtimes(patterns):
    found = {}
    for pattern in patterns:
        for path in sorted(glob.glob(pattern)) or [pattern]:
            try:
                found[path] = int(os.stat(path).st_mtime)
            except OSError:
                found[path] = None
    return found


def _release(link, main_pid):
    linked = os.path.realpath(link) if os.path.islink(link) else ""
    running = file_state.venv_of_command(file_state.command_of(main_pid)) if main_pid else ""
    return {"linked": linked, "running": running}


def _nccl_report(path):
    try:
        with open(path, encoding="utf-8") as handle:
            report = json.load(handle)
    except (OSError, ValueError):
        return None
    return report if isinstance(report, dict) else None


def _health(url, timeout):
    try:
        response = open_url(url, method="GET", timeout=timeout, validate_certs=False)
        return {"url": url, "status": response.getcode(), "error": None}
    except HTTPError as exc:
        return {"url": url, "status": exc.code, "error": None}
    except (URLError, OSError, ValueError) as exc:
        return {"url": url, "status": None, "error": str(getattr(exc, "reason", exc))}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            name=dict(type="str", default="sglang.service"),
            watch=dict(type="list", elements="path", default=[]),
            health_url=dict(type="str"),
            health_timeout=dict(type="int", default=5),
            release_link=dict(type="path"),
            loading_timeout=dict(type="int"),
            nccl_report=dict(type="path"),
            nccl_capability_majors=dict(type="list", elements="int", default=[]),
        ),
        supports_check_mode=True,
    )
    unit = module.params["name"]
    systemctl = module.get_bin_path("systemctl", required=True)
    argv = [systemctl, "show", "--timestamp=unix", unit]
    for prop in PROPERTIES:
        argv.append("--property=" + prop)
    rc, out, err = module.run_command(argv, environ_update={"LC_ALL": "C"})
    if rc != 0:
        module.fail_json(msg="systemctl show %s failed: %s" % (unit, (err or out).strip()), rc=rc)
    result = summarise(unit, parse_show(out), _mtimes(module.params["watch"]))
    health = {"url": module.params["health_url"], "status": None, "error": None}
    if module.params["health_url"] and result["active_state"] == "active":
        health = _health(module.params["health_url"], module.params["health_timeout"])
    result["health"] = health
    facts, notes = {}, {}
    if module.params["health_url"]:
        phase, loading = engine_phase(result, health["status"], time.time(), module.params["loading_timeout"])
        result["phase"] = phase
        notes["engine"] = None
        if loading is not None:
            result["loading"] = loading
            notes["engine"] = ("%s has been loading for %d s of the %d s it is given (/health: %s); a converge"
                               " waits for it rather than restarting it for its health" % (
                                   unit, loading["elapsed"], module.params["loading_timeout"],
                                   health["status"] or health["error"] or "no answer"))
            module.warn("note: " + notes["engine"])
    if module.params["release_link"]:
        result["release"] = _release(module.params["release_link"], result["main_pid"])
    if module.params["nccl_report"]:
        facts["sglang_service_nccl_smoke_report"] = _nccl_report(module.params["nccl_report"])
        notes["nccl_smoke"] = nccl.note(facts["sglang_service_nccl_smoke_report"])
        notes["nccl_version"] = nccl.version_finding((facts["sglang_service_nccl_smoke_report"] or {}).get("nccl"),
                                                     module.params["nccl_capability_majors"])
    if notes:
        facts["blackwell_sglang_notes"] = notes
        result["ansible_facts"] = facts
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
