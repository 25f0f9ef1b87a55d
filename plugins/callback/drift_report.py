# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: drift_report
type: aggregate
short_description: Reports, per host, what a check-mode run found would change
version_added: 0.1.0
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
description:
  - Reduces a playbook run in check and diff mode (C(--check --diff)) to one verdict per host
    and one line per task result that would change, with a short reason taken from the
    task's diff.
  - Every host that a play of the run selects (the inventory with C(--limit) applied) appears
    exactly once, with the status V(ok), V(drift), V(failed), V(unreachable),
    V(not checked) or V(not judged). A host is V(not checked) when the run stopped before the
    host went through every play that selects it (C(any_errors_fatal), C(max_fail_percentage),
    a serial batch never reached); its reason names the host and task whose failure stopped
    the run. A host is V(not judged) when a check found no drift on it but passed a decision
    check mode cannot judge; its reason names the first.
  - Drift found on a host before it failed stays in its report.
  - Tasks check mode cannot judge are listed as not judged, not as drift - a task tagged
    C(not_judged_in_check) that a check skips on its last C(when) condition (its check-mode
    guard, every condition before it held), a module that skips itself in check mode (the
    command module without C(creates)), a failure under C(ignore_errors) or rescued. A task
    skipped in a check without the tag is an ordinary skip, whatever its condition says.
    Handlers that the drift would notify are listed as consequences.
  - The verdicts come from the task results Ansible hands to callbacks, never from printed
    output; for C(no_log) tasks that is the censored result, which keeps C(changed).
  - At the end of the run it prints the table, and writes the report as JSON and Markdown
    where configured. The report's C(summary.exit_code) is what C(tools/drift-report)
    exits with, V(0) every selected host was checked, judged and is clean, V(1) drift, V(2) a
    host failed, was unreachable, was not checked or was not judged.
  - Per-host notes come through one channel, the fact C(blackwell_sglang_notes) in any task
    result (M(ansible.builtin.set_fact), or a module's C(ansible_facts)) - a dictionary of
    topics, each a string or a list of strings. The last value of a topic in the run stands; an
    empty one or null removes it. Notes are listed beside a host's verdict (JSON C(notes)) and
    never change it - this collection's roles note the preflight's PCIe findings (C(pcie)), the
    last NCCL all-reduce smoke test (C(nccl_smoke), which C(blackwell.sglang.sglang_service_info)
    returns in a check from the record the test left on the node), an NCCL that fails
    all-reduces on compute capability 12 (C(nccl_release), from the release's files, and
    C(nccl_version), from the smoke test) and an engine still loading its model (C(engine)). Any
    role or play can use it.
requirements:
  - Enable it by name, C(callbacks_enabled = blackwell.sglang.drift_report) in
    C(ansible.cfg) or C(ANSIBLE_CALLBACKS_ENABLED=blackwell.sglang.drift_report).
options:
  json_path:
    description: Write the report as JSON to this file at the end of the run.
    type: path
    env:
      - name: BLACKWELL_DRIFT_REPORT_JSON
    ini:
      - section: callback_drift_report
        key: json_path
  markdown_path:
    description: Write the report as Markdown tables to this file at the end of the run.
    type: path
    env:
      - name: BLACKWELL_DRIFT_REPORT_MARKDOWN
    ini:
      - section: callback_drift_report
        key: markdown_path
  events_path:
    description:
      - Record the structured events the report is built from to this file, one JSON object
        per line, so that C(tools/drift-report --from-events) can rebuild the report later.
      - Results are kept only in the fields the report reads.
    type: path
    env:
      - name: BLACKWELL_DRIFT_REPORT_EVENTS
    ini:
      - section: callback_drift_report
        key: events_path
  print_table:
    description: Print the report's table at the end of the run.
    type: bool
    default: true
    env:
      - name: BLACKWELL_DRIFT_REPORT_PRINT
    ini:
      - section: callback_drift_report
        key: print_table
"""

EXAMPLES = r"""
# ansible.cfg
# [defaults]
# callbacks_enabled = blackwell.sglang.drift_report
# [callback_drift_report]
# json_path = drift.json
# markdown_path = drift.md

# or for one run:
# ANSIBLE_CALLBACKS_ENABLED=blackwell.sglang.drift_report BLACKWELL_DRIFT_REPORT_JSON=drift.json \
#   ansible-playbook site.yml -i inventories/lab --check --diff
"""

import json

from ansible import context
from ansible.playbook.handler import Handler
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.callback import CallbackBase
from ansible.template import Templar

from ansible_collections.blackwell.sglang.plugins.plugin_utils import drift


def _play_id(play):
    """The play's identity across its serial batches. ansible-runner's display callback, which
    sees the play first, renames each repeat of a play's uuid to <uuid>_<n>."""
    return str(play._uuid).split("_", 1)[0]  # pylint: disable=protected-access


def _publishes(play):
    """Whether PLAY is the one that publishes the verdicts (its play variable PUBLISH_VAR)."""
    return bool((play.vars or {}).get(drift.PUBLISH_VAR))


class CallbackModule(CallbackBase):
    """Turns Ansible's callback calls into drift events and renders the report at the end."""

    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "blackwell.sglang.drift_report"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, display=None):
        super().__init__(display=display)
        self._collector = drift.DriftCollector()
        # The run's last play publishes what this collector found (drift.running_artifacts).
        drift.RUNNING[:] = [self._collector]
        self._plays = []
        self._started = set()
        self._events = None
        # Inside the play that publishes the verdicts (playbooks/publish.yml): not a play of the
        # check, so neither it nor its host is in the report.
        self._publishing = False
        self._play = None

    def set_options(self, task_keys=None, var_options=None, direct=None):
        super().set_options(task_keys=task_keys, var_options=var_options, direct=direct)
        if self.get_option("events_path"):
            # pylint: disable-next=consider-using-with
            self._events = open(self.get_option("events_path"), "w", encoding="utf-8")

    def _emit(self, event):
        self._collector.handle(event)
        if self._events is not None:
            self._events.write(json.dumps(event, sort_keys=True) + "\n")

    def v2_playbook_on_start(self, playbook):
        self._plays = [play for play in playbook.get_plays() if not _publishes(play)]
        check = context.CLIARGS.get("check") if context.CLIARGS else None
        self._emit({"event": "playbook_start", "plays": len(self._plays),
                    "check_mode": None if check is None else bool(check)})

    def v2_playbook_on_play_start(self, play):
        # The strategy starts a play once per serial batch, with the inventory restricted to
        # the batch; without the restriction (the limit still applies) it is the play's hosts.
        self._publishing = _publishes(play)
        self._play = play
        if self._publishing:
            return
        inventory = play.get_variable_manager()._inventory  # pylint: disable=protected-access
        play_id = _play_id(play)
        self._started.add(play_id)
        self._emit({
            "event": "play_start",
            "play_id": play_id,
            "play": play.get_name(),
            "selected": [h.name for h in inventory.get_hosts(play.hosts, ignore_restrictions=True)],
            "batch": [h.name for h in inventory.get_hosts(play.hosts)],
            "max_fail_percentage": play.max_fail_percentage,
        })

    def v2_playbook_on_no_hosts_remaining(self):
        if self._publishing:
            return
        self._emit({"event": "no_hosts_remaining"})

    def _result(self, kind, result, ignore_errors=False):
        if self._publishing:
            return
        task = result.task
        role = getattr(task, "_role", None)
        res = result.result
        self._emit({
            "event": "result",
            "kind": kind,
            "host": result.host.name,
            # The name without the role's collection: "sglang_service : Write the files the server starts from"
            # (ansible-core 2.21 puts "blackwell.sglang." before the role in task_name).
            "task": task.get_name(include_role_fqcn=False) or task.action,
            "role": role.get_name(include_role_fqcn=False) if role else None,
            "action": getattr(task, "resolved_action", None) or task.action,
            "path": task.get_path() or "",
            "handler": isinstance(task, Handler),
            "ignore_errors": bool(ignore_errors),
            "any_errors_fatal": self._fatal(task, result.host),
            "loop": isinstance(res.get("results"), list),
            "check_guard": drift.check_guard(getattr(task, "tags", None), getattr(task, "when", None)),
            "res": drift.slim_result(res, getattr(task, "args", None)),
        })

    def _fatal(self, task, host):
        """Whether the task is any_errors_fatal for HOST: a template (a play's keyword, kept as
        written on the result of a loop or of a task that failed before it was templated) is
        templated as the strategy does; one that cannot be is taken as not fatal."""
        value = task.any_errors_fatal
        if not isinstance(value, str):
            return bool(value)
        try:
            manager = self._play.get_variable_manager()
            variables = manager.get_vars(play=self._play, host=host, task=task)
            return boolean(Templar(loader=self._play.get_loader(), variables=variables).template(value), strict=False)
        except Exception:  # pylint: disable=broad-exception-caught
            return False

    def v2_runner_on_ok(self, result):
        self._result("ok", result)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._result("failed", result, ignore_errors)

    def v2_runner_on_skipped(self, result):
        self._result("skipped", result)

    def v2_runner_on_unreachable(self, result):
        self._result("unreachable", result)

    def v2_runner_item_on_ok(self, result):
        self._result("item_ok", result)

    def v2_runner_item_on_failed(self, result):
        self._result("item_failed", result)

    def v2_runner_item_on_skipped(self, result):
        self._result("item_skipped", result)

    def _unstarted_hosts(self, play):
        """The hosts a play that never started would have selected; None where unknown."""
        try:
            manager = play.get_variable_manager()
            pattern = Templar(loader=play.get_loader(), variables=manager.get_vars(play=play)).template(play.hosts)
            return [h.name for h in manager._inventory.get_hosts(pattern, ignore_restrictions=True)]  # pylint: disable=protected-access
        except Exception:  # pylint: disable=broad-exception-caught
            # A hosts pattern that cannot be resolved outside the run still counts as a play
            # that did not run: the report then treats every host as not checked.
            return None

    def v2_playbook_on_stats(self, stats):
        for play in self._plays:
            if _play_id(play) not in self._started:
                self._emit({"event": "unstarted_play", "play_id": _play_id(play),
                            "play": play.get_name(), "selected": self._unstarted_hosts(play)})
        failures, dark = dict(stats.failures), dict(stats.dark)
        # A host only the publishing play ran its one task on is no host of the check.
        processed = {name: count for name, count in stats.processed.items()
                     if name in self._collector.hosts or name in failures or name in dark}
        self._emit({"event": "stats", "processed": processed, "failures": failures, "dark": dark})
        report = self._collector.finish()
        if self._events is not None:
            self._events.flush()
        if self.get_option("json_path"):
            with open(self.get_option("json_path"), "w", encoding="utf-8") as handle:
                handle.write(drift.render_json(report))
        if self.get_option("markdown_path"):
            with open(self.get_option("markdown_path"), "w", encoding="utf-8") as handle:
                handle.write(drift.render_markdown(report))
        if self.get_option("print_table"):
            self._display.display("\n" + drift.render_text(report))
