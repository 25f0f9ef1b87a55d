# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Drift verdicts for a playbook run in check and diff mode: the one reduction of a run's
structured events to host x drifted task, and its text, Markdown and JSON renderings.

Plain Python without Ansible imports: the callback plugin ``blackwell.sglang.drift_report``
turns Ansible's callback calls into the plain event dictionaries handled here, and the
``tools/drift-report`` CLI reads the report the callback wrote. The unit tests feed the same
events directly.

Every host that a play of the run selected ends with exactly one status:
``ok``, ``drift``, ``failed``, ``unreachable`` or ``not checked`` (with the reason: the run
stopped before the host was checked to the end). Drift found before a host failed or was
stopped stays in its report. Exit codes: 0 every selected host was checked and is clean,
1 drift and nothing else, 2 a host failed, was unreachable or was not checked (or the run did
not complete, or selected no host), 3 bad invocation (the CLI's, nothing was run).
"""
from __future__ import annotations

import difflib
import json
import re
from dataclasses import asdict, dataclass, field

EXIT_CLEAN = 0
EXIT_DRIFT = 1
EXIT_FAILED = 2
EXIT_USAGE = 3

OK = "ok"
DRIFT = "drift"
FAILED = "failed"
UNREACHABLE = "unreachable"
NOT_CHECKED = "not checked"
# Checked to the end without drift, but with a decision check mode could not judge (a task
# skipped because the run is a check, a failure the check ignored or rescued): not `ok`, since a
# real run could still change or fail there. Notes (NOTES_FACT) are no such decision.
NOT_JUDGED = "not judged"
STATUSES = (OK, DRIFT, FAILED, UNREACHABLE, NOT_CHECKED, NOT_JUDGED)

REASON_WIDTH = 160

# The keys of a task result the reduction reads. The callback keeps only these in the events
# it records, so an event log holds no module output beyond these (a loop's `item` whole: the
# roles loop over rows without file content, and no_log results are kept censored).
RESULT_KEYS = ("changed", "diff", "msg", "false_condition", "skip_reason", "censored", "name",
               "state", "enabled", "masked", "item", "_ansible_item_label", "dest")

# The tag that marks a task check mode cannot judge. Such a task puts the condition that keeps it
# out of a check (`not ansible_check_mode`, or one the role's plan makes false only in a check)
# last in its `when`: a check that skips it on that condition, all the others having held, lists
# it as not judged. An untagged task skipped in a check is an ordinary skip, whatever its
# condition says.
NOT_JUDGED_TAG = "not_judged_in_check"


def check_guard(tags, conditions) -> str:
    """The check-mode guard of a task: its last condition when it carries NOT_JUDGED_TAG, else ''."""
    if NOT_JUDGED_TAG not in list(tags or []) or not conditions:
        return ""
    return str(list(conditions)[-1])


# The one channel for per-host notes: a task result whose facts hold this fact (set_fact, or a
# module's ansible_facts) gives the host a note per topic, a string or a list of strings (the
# preflight's PCIe findings, the NCCL smoke test's bus bandwidth, an engine still loading its
# model). The last value of a topic in the run stands; an empty one or null removes it. Notes sit
# beside a host's verdict and never change it.
NOTES_FACT = "blackwell_sglang_notes"

# apt's simulated transaction ("prepared" in its diff) names its plan under these headings.
_APT_HEADINGS = (
    ("NEW packages will be installed", "would install"),
    ("packages will be REMOVED", "would remove"),
    ("packages will be upgraded", "would upgrade"),
    ("packages will be DOWNGRADED", "would downgrade"),
)


def slim_result(res, task_args=None) -> dict:
    """The part of a task result the report needs, JSON-serialisable.

    `task_args` are the task's arguments as the callback sees them: a template or copy run in
    check mode against a missing file returns neither its dest nor its invocation."""
    if not isinstance(res, dict):
        return {}
    out = {key: res[key] for key in RESULT_KEYS if key in res}
    facts = res.get("ansible_facts")
    if isinstance(facts, dict) and isinstance(facts.get(NOTES_FACT), dict):
        out["notes"] = {str(topic): _note_lines(note) for topic, note in facts[NOTES_FACT].items()}
    # A file module run in check mode may not echo its dest; the arguments it ran with do, and
    # failing those, the task's own (templated by then, unless the task loops).
    for args in ((res.get("invocation") or {}).get("module_args"), task_args):
        dest = args.get("dest") if isinstance(args, dict) else None
        if "dest" not in out and isinstance(dest, str) and "{{" not in dest:
            out["dest"] = dest
    return json.loads(json.dumps(out, default=str))


def _note_lines(note) -> list:
    """A note as lines: a string is one, a list holds one each; nothing is none."""
    if note is None or note == "":
        return []
    if isinstance(note, (list, tuple)):
        return [" ".join(str(line).split()) for line in note if str(line).strip()]
    return [" ".join(str(note).split())]


@dataclass
class Finding:
    """One task's verdict on one host (one loop item where the task loops)."""

    task: str
    action: str
    reason: str
    path: str = ""
    item: str | None = None

    @property
    def label(self) -> str:
        return f"{self.task} [{self.item}]" if self.item is not None else self.task


@dataclass
class HostReport:
    name: str
    status: str = OK
    reason: str = ""
    drift: list = field(default_factory=list)
    not_judged: list = field(default_factory=list)
    failures: list = field(default_factory=list)
    handlers: list = field(default_factory=list)
    # set while the run goes on: the host failed or was unreachable itself / was stopped
    failed: bool = False
    unreachable: bool = False
    stopped: str = ""
    # the host's last result was a failure nothing handled (a rescue or an always section sends
    # more results after it): what the recap will count, told before the recap (preview)
    failed_last: bool = False


def _short(text: str, width: int = REASON_WIDTH) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 3] + "..."


def _diffs(res: dict) -> list:
    diff = res.get("diff")
    if not diff:
        return []
    return [d for d in (diff if isinstance(diff, list) else [diff]) if isinstance(d, dict) and d]


def _describe_apt(prepared: str) -> str:
    parts = []
    lines = prepared.splitlines()
    for heading, verb in _APT_HEADINGS:
        for pos, line in enumerate(lines):
            if heading in line:
                names = []
                for follow in lines[pos + 1:]:
                    if not follow.startswith(" "):
                        break
                    names.extend(follow.split())
                parts.append(f"package {verb}: {' '.join(names)}")
    if parts:
        return "; ".join(parts)
    # A local .deb (apt's `deb:` option) is simulated with dpkg, which words its plan otherwise.
    upgrade = re.search(r"Unpacking (\S+) \((\S+)\) over \((\S+)\)", prepared)
    if upgrade:
        return f"package would change: {upgrade[1]} {upgrade[3]} -> {upgrade[2]}"
    fresh = re.findall(r"Selecting previously unselected package (\S+?)\.?$", prepared, re.M)
    if fresh:
        return f"package would install: {' '.join(fresh)}"
    first = next((line for line in lines if line.strip()), "")
    return f"package change: {first.strip()}"


def _path_of(diff: dict, dest: str = "") -> str:
    for key in ("before_header", "after_header"):
        value = diff.get(key)
        # A new file's diff is headed by the template's or copy's source in Ansible's temporary
        # directory on the controller; the file it would create is the task's dest.
        if isinstance(value, str) and value.startswith("/") and "/.ansible/tmp/" not in value:
            return value.split(" (", 1)[0]
    for side in ("after", "before"):
        value = diff.get(side)
        if isinstance(value, dict) and value.get("path"):
            return str(value["path"])
    return dest


def _describe_diff(diff: dict, dest: str = "") -> str:
    """A short reason for one diff entry, as the modules shape them."""
    if diff.get("prepared"):
        return _describe_apt(str(diff["prepared"]))
    before, after = diff.get("before"), diff.get("after")
    path = _path_of(diff, dest)
    where = path or "target"
    if isinstance(before, dict) or isinstance(after, dict):
        before = before if isinstance(before, dict) else {}
        after = after if isinstance(after, dict) else {}
        if before.get("state") == "absent" and after.get("state") not in (None, "absent"):
            return f"{where} would be created ({after['state']})"
        if after.get("state") == "absent" and before.get("state") not in (None, "absent"):
            return f"{where} would be removed"
        # Modules put the attributes they would set in `after`; `before` may describe more.
        changes = [
            f"{key} {before.get(key)} -> {after.get(key)}"
            for key in sorted(after)
            if key != "path" and before.get(key) != after.get(key)
        ]
        return f"{where}: {', '.join(changes)}" if changes else ""
    if isinstance(before, str) or isinstance(after, str):
        before, after = before or "", after or ""
        if before == after:
            return ""
        if not before:
            return f"{where} would be created"
        if not after:
            return f"{where} would be emptied"
        added = removed = 0
        for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0):
            if line.startswith("+") and not line.startswith("+++"):
                added += 1
            elif line.startswith("-") and not line.startswith("---"):
                removed += 1
        return f"content of {where} would change (+{added} -{removed} lines)"
    return ""


def describe_change(action: str, res: dict) -> tuple[str, str]:
    """(reason, path) for a task result that reports `changed` in check mode."""
    reasons, paths = [], []
    for diff in _diffs(res):
        reason = _describe_diff(diff, str(res.get("dest") or ""))
        if reason and reason not in reasons:
            reasons.append(reason)
        path = _path_of(diff, str(res.get("dest") or ""))
        if path and path not in paths:
            paths.append(path)
    if reasons:
        return _short("; ".join(reasons)), ", ".join(paths)
    short_action = action.rsplit(".", 1)[-1]
    if short_action in ("service", "systemd", "systemd_service"):
        wanted = ", ".join(f"{key}={res[key]}" for key in ("state", "enabled", "masked") if key in res)
        name = res.get("name", "service")
        return _short(f"service {name} would change ({wanted or 'no detail'})"), ""
    if res.get("msg"):
        # A debug task reports a change (a restart it notifies) in its own words.
        if short_action == "debug":
            return _short(str(res["msg"])), ""
        return _short(f"{short_action}: {res['msg']}"), ""
    return f"{short_action} would change (the module reports no diff)", ""


def not_judged_reason(res: dict, guard: str = "") -> str | None:
    """Why a skipped result is a task check mode could not judge; None for an ordinary skip.

    ``guard`` is the check-mode guard of a task marked NOT_JUDGED_TAG (its last condition, see
    ``check_guard``): skipped on exactly that condition, every condition before it held, and
    only the run being a check kept the task from running. A module that skips itself in a
    check says so in its message (the command module's "would have run if not in check mode")."""
    condition = str(res.get("false_condition", ""))
    if guard and condition == guard:
        return f"runs only outside check mode (when: {condition})"
    # A marked no_log task's skip hides the condition it was skipped on: a real run could have
    # run it, so it is counted as not judged rather than passed over.
    if guard and "censored" in res:
        return f"runs only outside check mode (when: {guard}; no_log hides whether that was the condition)"
    msg = str(res.get("msg", ""))
    if "check mode" in msg:
        return _short(msg)
    return None


def _item_label(res: dict) -> str | None:
    """The loop item's label; None where a no_log result hides it (the task's own label stands)."""
    label = res.get("_ansible_item_label", res.get("item"))
    if label is None:
        return None
    return label if isinstance(label, str) else json.dumps(label, sort_keys=True)


class DriftCollector:
    """Reduces a run's events (plain dictionaries, see ``handle``) to the report.

    Events, in the order the run produces them:
    ``playbook_start`` (plays: how many the playbook has, check_mode),
    ``play_start`` (play_id, play, selected: every host the play selects with the limit
    applied, batch: the hosts of the batch starting now, max_fail_percentage),
    ``result`` (kind: ok, failed, skipped, unreachable, item_ok, item_failed or item_skipped;
    host, task, role, action, path, handler, ignore_errors, any_errors_fatal, loop, res, and
    check_guard: the condition of a task marked NOT_JUDGED_TAG that only a check makes false),
    ``no_hosts_remaining`` (the strategy stopped the batch),
    ``unstarted_play`` (play_id, play, selected or None where it could not be resolved), and
    ``stats`` (processed, failures, dark: the play recap's counters).
    A result whose facts carry NOTES_FACT (``res.notes``) sets the host's notes, topic by topic.
    """

    def __init__(self) -> None:
        self.hosts: dict[str, HostReport] = {}
        self.stats: dict | None = None
        self.check_mode: bool | None = None
        self._plays_total = 0
        self._plays: dict[str, tuple[str, list | None]] = {}
        self._started: set[str] = set()
        self._reached: set[tuple[str, str]] = set()
        self._batch: list = []
        self._batch_play: dict = {}
        self._batch_failures: list = []
        self._batch_stopped = False
        self._stop_reason = ""
        self._notes: dict[str, dict] = {}

    def host(self, name: str) -> HostReport:
        if name not in self.hosts:
            self.hosts[name] = HostReport(name)
        return self.hosts[name]

    def handle(self, event: dict) -> None:
        kind = event.get("event")
        if kind == "playbook_start":
            self._plays_total += int(event.get("plays") or 0)
            if event.get("check_mode") is not None:
                self.check_mode = bool(self.check_mode is not False and event["check_mode"])
        elif kind == "play_start":
            self._play_start(event)
        elif kind == "unstarted_play":
            selected = event.get("selected")
            self._plays.setdefault(event["play_id"], (event.get("play", ""), selected))
            for name in selected or []:
                self.host(name)
        elif kind == "result":
            self._result(event)
        elif kind == "no_hosts_remaining":
            limit = self._batch_play.get("max_fail_percentage")
            if isinstance(limit, float) and limit.is_integer():
                limit = int(limit)
            self._stop_batch(f"max_fail_percentage: {limit}" if limit is not None
                             else "no host of its batch was left")
        elif kind == "stats":
            self.stats = {key: dict(event.get(key) or {}) for key in ("processed", "failures", "dark")}

    def _play_start(self, event: dict) -> None:
        play_id = event["play_id"]
        selected = list(event.get("selected") or [])
        self._plays.setdefault(play_id, (event.get("play", ""), selected))
        self._started.add(play_id)
        for name in selected:
            self.host(name)
        self._batch = list(event.get("batch") or [])
        self._batch_play = {"play": event.get("play", ""),
                            "max_fail_percentage": event.get("max_fail_percentage")}
        self._batch_failures = []
        self._batch_stopped = False
        for name in self._batch:
            self.host(name)
            self._reached.add((play_id, name))

    def _stop_batch(self, why: str) -> None:
        """The strategy stopped the current batch: its hosts that did not fail themselves did
        not run the rest of the play (nor, as the run ends, anything after it)."""
        if self._batch_stopped or not self._batch_failures:
            return
        self._batch_stopped = True
        # A host stops at its first failure nothing handled: earlier failures of the same host
        # were rescued, so its last one is what stopped it.
        first = self._batch_failures[0][0]
        host, label, unreachable = [f for f in self._batch_failures if f[0] == first][-1]
        verb = "was unreachable at" if unreachable else "failed"
        self._stop_reason = (f"the run stopped after {host} {verb} '{label}' in play "
                             f"'{self._batch_play['play']}' ({why})")
        for name in self._batch:
            report = self.host(name)
            if not (report.failed or report.unreachable or report.stopped):
                report.stopped = self._stop_reason

    def _result(self, event: dict) -> None:
        name = event.get("host")
        if not name:
            return
        kind = event.get("kind", "")
        res = event.get("res") or {}
        report = self.host(name)
        report.failed_last = False
        task = event.get("task") or event.get("action") or "?"
        role = event.get("role")
        if role and not task.startswith(f"{role} : "):
            task = f"{role} : {task}"
        action = event.get("action") or ""
        path = event.get("path") or ""
        item = _item_label(res) if kind.startswith("item_") else None
        if isinstance(res.get("notes"), dict) and kind in ("ok", "failed"):
            notes = self._notes.setdefault(name, {})
            for topic, lines in res["notes"].items():
                if lines:
                    notes[topic] = list(lines)
                else:
                    notes.pop(topic, None)

        if kind in ("failed", "unreachable") and not event.get("ignore_errors"):
            unreachable = kind == "unreachable"
            if unreachable:
                report.unreachable = True
            else:
                report.failed = True
                report.failed_last = True
            report.failures.append(Finding(task, action, _short(res.get("msg") or kind), path, None))
            self._batch_failures.append((name, task, unreachable))
            if event.get("any_errors_fatal"):
                self._stop_batch("any_errors_fatal")
            return
        if kind == "failed":
            msg = _short(res.get("msg") or "failed")
            report.not_judged.append(Finding(task, action, f"failed in check mode (ignored): {msg}", path, None))
            return
        # A looping task sends one result per item, then an aggregate carrying every item's
        # result under `results`: counting the aggregate too would report each drift twice.
        if event.get("loop") and kind in ("ok", "skipped"):
            return
        if kind in ("ok", "item_ok"):
            if not res.get("changed"):
                return
            if "censored" in res:
                # no_log hides the result but keeps `changed`: the drift is real, its detail not shown.
                reason, changed_path = "would change (no_log: the task's details are hidden)", ""
            else:
                reason, changed_path = describe_change(action, res)
            finding = Finding(task, action, reason, changed_path, item)
            (report.handlers if event.get("handler") else report.drift).append(finding)
        elif kind in ("skipped", "item_skipped"):
            why = not_judged_reason(res, event.get("check_guard") or "")
            if why:
                report.not_judged.append(Finding(task, action, why, "", item))

    def _unchecked_reason(self, name: str) -> str:
        """Why a host that neither failed nor was unreachable was not checked to the end; ''
        when every play that selects it ran it through."""
        report = self.hosts[name]
        if report.stopped:
            return report.stopped
        if self.stats is None:
            return "the run did not complete (no play recap)"
        for play_id, (play, selected) in self._plays.items():
            if selected is None:
                if play_id not in self._started:
                    return self._stop_reason or f"the run ended before play '{play}' started"
                continue
            if name in selected and (play_id, name) not in self._reached:
                return self._stop_reason or f"the run ended before play '{play}' reached it"
        if self._plays_total > len(self._plays):
            return self._stop_reason or "the run ended before its last play started"
        return ""

    def finish(self) -> dict:
        """The report as a dict, every host's status settled."""
        completed = self.stats is not None
        stats = self.stats or {}
        for name in stats.get("processed") or {}:
            self.host(name)
        verdicts = {}
        for name, report in self.hosts.items():
            if completed:
                # The recap is the authority: a failure that a rescue block handled is not a
                # failed host (and a host stopped by another's failure is not counted there).
                unreachable = bool(stats["dark"].get(name))
                failed = bool(stats["failures"].get(name)) and not unreachable
            else:
                unreachable, failed = report.unreachable, report.failed and not report.unreachable
            failures, not_judged, reason = report.failures, report.not_judged, ""
            if unreachable:
                status = UNREACHABLE
            elif failed:
                status = FAILED
                # Only the last failure stopped the host; a rescue block handled the ones before.
                not_judged = not_judged + [
                    Finding(f.task, f.action, f"failed, then rescued: {f.reason}", f.path)
                    for f in failures[:-1]]
                failures = failures[-1:]
            else:
                not_judged = not_judged + [
                    Finding(f.task, f.action, f"failed in check mode (rescued): {f.reason}", f.path)
                    for f in failures]
                failures = []
                reason = self._unchecked_reason(name)
                status = NOT_CHECKED if reason else DRIFT if report.drift else OK
                if status == OK and self.check_mode and not_judged:
                    status = NOT_JUDGED
                    reason = (f"check mode could not judge {len(not_judged)} decision(s), the first "
                              f"'{not_judged[0].label}': {not_judged[0].reason}")
            verdicts[name] = HostReport(name, status, reason, report.drift, not_judged, failures,
                                        report.handlers)
        hosts = {
            name: {
                "status": r.status,
                "reason": r.reason,
                "drift": [_finding_dict(f) for f in r.drift],
                "not_judged": [_finding_dict(f) for f in r.not_judged],
                "failures": [_finding_dict(f) for f in r.failures],
                "handlers_that_would_run": [_finding_dict(f) for f in r.handlers],
                # The host's notes by topic (NOTES_FACT), each a list of lines.
                "notes": self._notes.get(name, {}),
            }
            for name, r in sorted(verdicts.items())
        }
        return report_of(hosts, self.check_mode, completed)

    def preview(self, alive=None) -> dict:
        """The report as it would stand if the run ended now: what the run's own last play
        publishes (``artifacts``) before Ansible prints the recap. The hosts' own results stand in
        for the recap: a host is unreachable where it was unreachable, and failed where it failed
        and is not among ``alive`` (the hosts still in the run: one whose failure a rescue handled
        is); without ``alive``, where its last result was a failure nothing handled."""
        if self.stats is not None:
            return self.finish()
        self.stats = {
            "processed": {name: 1 for name in self.hosts},
            "failures": {name: 1 for name, r in self.hosts.items()
                         if r.failed and not r.unreachable
                         and (r.failed_last if alive is None else name not in alive)},
            "dark": {name: 1 for name, r in self.hosts.items() if r.unreachable},
        }
        try:
            return self.finish()
        finally:
            self.stats = None


def report_of(hosts: dict, check_mode: bool | None, completed: bool) -> dict:
    """The report of HOSTS (name to verdict, as the report's ``hosts`` holds them): the summary
    counted from them, the exit code decided from their statuses."""
    hosts = {name: hosts[name] for name in sorted(hosts)}
    statuses = [h["status"] for h in hosts.values()]
    if not completed or not hosts:
        # No recap: the run stopped before any verdict. No hosts: the inventory or limit
        # matched nothing, and "no drift" would be a verdict on nothing.
        exit_code = EXIT_FAILED
    elif any(s in (FAILED, UNREACHABLE, NOT_CHECKED, NOT_JUDGED) for s in statuses):
        exit_code = EXIT_FAILED
    elif DRIFT in statuses:
        exit_code = EXIT_DRIFT
    else:
        exit_code = EXIT_CLEAN
    return {
        "summary": {
            "hosts": len(hosts),
            "ok_hosts": statuses.count(OK),
            # hosts with drift whatever their status: drift found before a failure is kept
            "drifted_hosts": sum(1 for h in hosts.values() if h["drift"]),
            "failed_hosts": statuses.count(FAILED),
            "unreachable_hosts": statuses.count(UNREACHABLE),
            "not_checked_hosts": statuses.count(NOT_CHECKED),
            "not_judged_hosts": statuses.count(NOT_JUDGED),
            "drifted_tasks": sum(len(h["drift"]) for h in hosts.values()),
            "not_judged_tasks": len({f["label"] for h in hosts.values() for f in h["not_judged"]}),
            "check_mode": check_mode,
            "run_completed": completed,
            "exit_code": exit_code,
        },
        "hosts": hosts,
    }


# The run's verdicts as its artifacts (Ansible's set_stats, which ansible-runner and AWX keep as
# the job's artifacts): one key per host, as AWX merges the artifacts of a workflow's jobs key by
# key, so the slices of a sliced job never overwrite each other's hosts.
ARTIFACT_PREFIX = "blackwell_sglang_drift_"

# The collector of the drift_report callback running in this ansible-playbook process, for the
# run's last play to publish (the lookup blackwell.sglang.drift_verdicts); empty where the callback
# is not enabled. Ansible forks its workers from the process the callback runs in, so a task's
# lookup sees every result handled before the task started.
RUNNING: list = []
# The play variable that marks the play publishing them: the callback leaves it out of the report,
# as the merge leaves out the events of the play so named (playbooks/publish.yml).
PUBLISH_VAR = "blackwell_sglang_drift_publish"
PUBLISH_PLAY = "Publish the drift verdicts as the run's artifacts"


def artifact_key(host: str) -> str:
    """The artifact key of HOST's verdict: ARTIFACT_PREFIX and the name, each character but an
    ASCII letter or digit written as _ and its code in two hex digits (__ and six past 255): a
    valid variable name for every host name, and no two names give one key."""
    out = []
    for char in host:
        if char.isascii() and char.isalnum():
            out.append(char)
        else:
            out.append(f"_{ord(char):02x}" if ord(char) < 256 else f"__{ord(char):06x}")
    return ARTIFACT_PREFIX + "".join(out)


def artifacts(report: dict) -> dict:
    """The report's verdicts as set_stats data: per host, its verdict as the report has it,
    with its name and whether the run was a check."""
    check_mode = report["summary"].get("check_mode")
    return {artifact_key(name): {"host": name, "check_mode": check_mode, **host}
            for name, host in report["hosts"].items()}


def running_artifacts(alive=None) -> dict:
    """What the drift_report callback of this process has found so far, as artifacts; {} where
    the callback is not enabled. ``alive``: the hosts still in the run (``preview``)."""
    return artifacts(RUNNING[-1].preview(alive)) if RUNNING else {}


class MergeError(ValueError):
    """Jobs that cannot make one report (a host in two of them, no verdicts at all)."""


# ansible-runner's event names (its display callback, which AWX's job events are) to the kinds of
# the collector's result events.
_RUNNER_RESULTS = {"runner_on_ok": "ok", "runner_on_failed": "failed", "runner_on_skipped": "skipped",
                   "runner_on_unreachable": "unreachable", "runner_item_on_ok": "item_ok",
                   "runner_item_on_failed": "item_failed", "runner_item_on_skipped": "item_skipped"}


def _collector_events(events) -> list:
    """A job's events as ansible-runner and AWX record them, as the collector's events: the plays
    without the hosts they select (the runner's events do not name them), each task result, the
    recap. Enough to tell a host's failures and drift; not the tags of a task check mode cannot
    judge, so a host's not-judged tasks may be missing, nor (as ansible-runner keeps no more of a
    no_log result than that it was hidden) whether a no_log task would change."""
    out, handler, publishing, seen = [], False, False, set()
    for event in events:
        if not isinstance(event, dict):
            continue
        kind, data = event.get("event"), event.get("event_data") or {}
        if kind in ("playbook_on_task_start", "playbook_on_handler_task_start"):
            handler = kind == "playbook_on_handler_task_start"
        elif kind == "playbook_on_play_start":
            # The play that publishes the verdicts is no play of the check (as for the callback).
            publishing = (data.get("play") or data.get("name")) == PUBLISH_PLAY
            if not publishing:
                out.append({"event": "play_start", "play_id": str(data.get("play_uuid") or ""),
                            "play": data.get("play") or "", "selected": [], "batch": []})
        elif kind in _RUNNER_RESULTS and data.get("host") and not publishing:
            seen.add(data["host"])
            res = data.get("res") or {}
            out.append({"event": "result", "kind": _RUNNER_RESULTS[kind], "host": data["host"],
                        "task": data.get("task") or "", "role": data.get("role") or None,
                        "action": data.get("resolved_action") or data.get("task_action") or "",
                        "path": data.get("task_path") or "", "handler": handler,
                        "ignore_errors": bool(data.get("ignore_errors")), "any_errors_fatal": False,
                        "loop": isinstance(res.get("results"), list),
                        "res": slim_result(res)})
        elif kind == "playbook_on_stats":
            failures, dark = dict(data.get("failures") or {}), dict(data.get("dark") or {})
            processed = {name: count for name, count in (data.get("processed") or {}).items()
                         if name in seen or name in failures or name in dark}
            out.append({"event": "stats", "processed": processed, "failures": failures, "dark": dark})
    return out


def job_of_events(events) -> dict | None:
    """One job's verdicts from its events, as ansible-runner writes them
    (artifacts/<ident>/job_events/*.json) and AWX's API lists them (/api/v2/jobs/<id>/job_events/):
    the event ``playbook_on_stats`` holds the set_stats data (``artifact_data``) and the recap;
    the verdicts told from the task results stand in for a host the job published none for.
    ``None`` where the job has no recap (it stopped before it)."""
    events = sorted((e for e in events if isinstance(e, dict)), key=lambda e: e.get("counter") or 0)
    stats = [e for e in events if e.get("event") == "playbook_on_stats"]
    if not stats:
        return None
    told = _collector_events(events)
    # The recap as the callback reads it: without a host only the publishing play touched.
    recap = next(e for e in reversed(told) if e["event"] == "stats")
    return {"artifacts": dict((stats[-1].get("event_data") or {}).get("artifact_data") or {}),
            "recap": {key: recap[key] for key in ("processed", "failures", "dark")},
            "told": replay(told)["hosts"]}


def merge(jobs: dict) -> dict:
    """One report from the verdicts several jobs published: the slices of a sliced AWX job, each
    checking its own hosts. ``jobs``: a name (where the job came from) to ``{"artifacts": ...,
    "recap": ..., "told": ...}`` (``job_of_events``; AWX's job detail has the artifacts alone), or
    to None for a job without a recap. A host the recap counts but with no published verdict (its
    job ended before its last play, as a run does once every host of a batch failed) takes the
    verdict told from the job's task results. The report is the one the callback writes for one
    run over every host of the jobs; a job without a recap, or jobs with no host at all, make it
    incomplete."""
    hosts, owner, check_modes, completed = {}, {}, set(), bool(jobs)
    for name, job in jobs.items():
        if job is None:
            completed = False
            continue
        published = {}
        for key, verdict in (job.get("artifacts") or {}).items():
            if key.startswith(ARTIFACT_PREFIX) and isinstance(verdict, dict) and "host" in verdict:
                published[str(verdict["host"])] = verdict
        recap = job.get("recap")
        if recap is None and not published:
            # A job's artifacts alone, with nothing published: which hosts it had is unknown.
            completed = False
            continue
        recap = recap or {}
        counted = set(recap.get("processed") or {}) | set(recap.get("failures") or {}) | set(recap.get("dark") or {})
        for host in sorted(set(published) | counted):
            if host in owner:
                raise MergeError(f"host {host} is in {owner[host]} and in {name}: the jobs are not slices of one run")
            owner[host] = name
            if host in published:
                check_modes.add(published[host].get("check_mode"))
                hosts[host] = {k: v for k, v in published[host].items() if k not in ("host", "check_mode")}
                continue
            told = (job.get("told") or {}).get(host)
            if told is None or told["status"] == OK:
                # Task results cannot show a decision check mode cannot judge: never a clean bill.
                told = dict(told or {"drift": [], "not_judged": [], "failures": [], "handlers_that_would_run": [],
                                     "notes": {}},
                            status=NOT_JUDGED if told else NOT_CHECKED,
                            reason=f"{name} published no verdict for it: the run ended before its last play")
            hosts[host] = told
    if len(check_modes - {None}) > 1:
        raise MergeError("the jobs mix a check and a run that was not one: merge the slices of one check")
    check_mode = None if None in check_modes or not check_modes else all(check_modes)
    return report_of(hosts, check_mode, completed)


def incomplete_report() -> dict:
    """The report of a run that produced no verdict at all (it stopped before its recap)."""
    return DriftCollector().finish()


def replay(events) -> dict:
    """The report for a sequence of recorded events."""
    collector = DriftCollector()
    for event in events:
        collector.handle(event)
    return collector.finish()


def _finding_dict(finding: Finding) -> dict:
    out = asdict(finding)
    out["label"] = finding.label
    return out


def _rows(report: dict) -> list[tuple[str, str, str]]:
    rows = []
    for name, host in report["hosts"].items():
        for finding in host["drift"]:
            rows.append((name, finding["label"], finding["reason"]))
        for finding in host["failures"]:
            rows.append((name, finding["label"], f"{host['status'].upper()}: {finding['reason']}"))
        if host["status"] in (FAILED, UNREACHABLE) and not host["failures"]:
            rows.append((name, "-", host["status"].upper()))
        if host["status"] in (NOT_CHECKED, NOT_JUDGED):
            rows.append((name, "-", f"{host['status'].upper()}: {host['reason']}"))
    return rows


def _not_judged_rows(report: dict) -> list[tuple[str, str, str]]:
    # One row per task and reason: hosts share a row only where they share the reason.
    tasks: dict[tuple[str, str], list] = {}
    for name, host in report["hosts"].items():
        for finding in host["not_judged"]:
            hosts = tasks.setdefault((finding["label"], finding["reason"]), [])
            if name not in hosts:
                hosts.append(name)
    return [(label, _host_list(hosts), why) for (label, why), hosts in tasks.items()]


def _notes_rows(report: dict) -> list[tuple[str, str, str]]:
    return [(name, topic, line) for name, host in report["hosts"].items()
            for topic, lines in (host.get("notes") or {}).items() for line in lines]


def _host_list(hosts: list) -> str:
    return ", ".join(hosts) if len(hosts) <= 4 else f"{len(hosts)} hosts"


def summary_line(report: dict) -> str:
    s = report["summary"]
    if not s["run_completed"]:
        return "The check run did not complete: no verdict (see the output above)."
    if not s["hosts"]:
        return "No host was checked: the inventory or the limit matched nothing."
    line = (
        f"{s['hosts']} host(s): {s['ok_hosts']} ok, {s['drifted_hosts']} with drift "
        f"({s['drifted_tasks']} task result(s)), {s['failed_hosts']} failed, "
        f"{s['unreachable_hosts']} unreachable, {s['not_checked_hosts']} not checked, "
        f"{s.get('not_judged_hosts', 0)} not judged; "
        f"{s['not_judged_tasks']} task(s) not judged in check mode."
    )
    if s.get("check_mode") is False:
        line += " Not a check run: what is listed as drift was changed."
    return line


def render_text(report: dict) -> str:
    out = []
    rows = _rows(report)
    if rows:
        out.append(_text_table(("HOST", "TASK", "REASON"), rows))
    else:
        out.append("No drift.")
    nj = _not_judged_rows(report)
    if nj:
        out.append("")
        out.append("Not judged in check mode:")
        out.append(_text_table(("TASK", "HOSTS", "WHY"), nj))
    notes = _notes_rows(report)
    if notes:
        out.append("")
        out.append("Notes:")
        out.append(_text_table(("HOST", "TOPIC", "NOTE"), notes))
    out.append("")
    out.append(summary_line(report))
    return "\n".join(out)


def _text_table(header: tuple, rows: list) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    widths[-1] = 0
    lines = []
    for row in [header, *rows]:
        lines.append("  ".join(str(cell).ljust(w) for cell, w in zip(row, widths)).rstrip())
    return "\n".join(lines)


def _md_cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_markdown(report: dict) -> str:
    out = ["# Drift report", "", summary_line(report), ""]
    out += ["| host | status | drifted | not judged | why not checked or judged |", "|---|---|---|---|---|"]
    for name, host in report["hosts"].items():
        out.append(f"| {_md_cell(name)} | {host['status']} | {len(host['drift'])} | "
                   f"{len(host['not_judged'])} | {_md_cell(host['reason'])} |")
    out += ["", "## Drift", ""]
    rows = _rows(report)
    if rows:
        out += ["| host | task | reason |", "|---|---|---|"]
        out += [f"| {_md_cell(h)} | {_md_cell(t)} | {_md_cell(r)} |" for h, t, r in rows]
    else:
        out.append("No drift.")
    nj = _not_judged_rows(report)
    if nj:
        out += ["", "## Not judged in check mode", "", "| task | hosts | why |", "|---|---|---|"]
        out += [f"| {_md_cell(t)} | {_md_cell(h)} | {_md_cell(w)} |" for t, h, w in nj]
    notes = _notes_rows(report)
    if notes:
        out += ["", "## Notes", "", "| host | topic | note |", "|---|---|---|"]
        out += [f"| {_md_cell(h)} | {_md_cell(t)} | {_md_cell(n)} |" for h, t, n in notes]
    return "\n".join(out) + "\n"


def render_json(report: dict) -> str:
    return json.dumps(report, indent=2, sort_keys=True) + "\n"
