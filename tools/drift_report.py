"""Fleet drift report: a playbook run in check and diff mode, reduced to host x drifted task.

`tools/drift-report` runs this file with the collection's virtualenv. The event processing
(`DriftCollector`) is plain Python over ansible-runner event dictionaries, so it is tested with
recorded events; only `run_check` touches ansible-runner.

Exit codes: 0 no drift, 1 drift, 2 a host failed or was unreachable (or the run itself failed),
3 bad invocation (nothing was run).
"""
from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import shutil
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

EXIT_CLEAN = 0
EXIT_DRIFT = 1
EXIT_FAILED = 2
EXIT_USAGE = 3

REASON_WIDTH = 160
_ANSI = re.compile(r"\x1b\[[0-9;]*m")

# apt's simulated transaction ("prepared" in its diff) names its plan under these headings.
_APT_HEADINGS = (
    ("NEW packages will be installed", "would install"),
    ("packages will be REMOVED", "would remove"),
    ("packages will be upgraded", "would upgrade"),
    ("packages will be DOWNGRADED", "would downgrade"),
)


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
    status: str = "ok"
    drift: list = field(default_factory=list)
    not_judged: list = field(default_factory=list)
    failures: list = field(default_factory=list)
    handlers: list = field(default_factory=list)


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


def _path_of(diff: dict) -> str:
    for key in ("before_header", "after_header"):
        value = diff.get(key)
        if isinstance(value, str) and value.startswith("/"):
            return value.split(" (", 1)[0]
    for side in ("after", "before"):
        value = diff.get(side)
        if isinstance(value, dict) and value.get("path"):
            return str(value["path"])
    return ""


def _describe_diff(diff: dict) -> str:
    """A short reason for one diff entry, as the modules shape them."""
    if diff.get("prepared"):
        return _describe_apt(str(diff["prepared"]))
    before, after = diff.get("before"), diff.get("after")
    path = _path_of(diff)
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
        reason = _describe_diff(diff)
        if reason and reason not in reasons:
            reasons.append(reason)
        path = _path_of(diff)
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
        return _short(f"{short_action}: {res['msg']}"), ""
    return f"{short_action} would change (the module reports no diff)", ""


def result_from_stdout(stdout: str) -> dict:
    """The task result the default callback prints after '=> ' when run with -v.

    ansible-runner's skipped and unreachable events carry no `res`; the printed result is the
    only place their reason (the false condition, a check-mode skip message) reaches us.
    """
    text = _ANSI.sub("", stdout or "")
    pos = text.find("=> {")
    while pos != -1:
        try:
            value = json.JSONDecoder().raw_decode(text[pos + 3:])[0]
        except ValueError:
            pos = text.find("=> {", pos + 1)
            continue
        return value if isinstance(value, dict) else {}
    return {}


def not_judged_reason(res: dict) -> str | None:
    """Why a skipped result is a task check mode could not judge; None for an ordinary skip."""
    condition = str(res.get("false_condition", ""))
    if "ansible_check_mode" in condition:
        return f"runs only outside check mode (when: {condition})"
    msg = str(res.get("msg", ""))
    if "check mode" in msg:
        return _short(msg)
    return None


class DriftCollector:
    """Feeds on ansible-runner events and keeps what the report needs."""

    def __init__(self) -> None:
        self.hosts: dict[str, HostReport] = {}
        self.stats: dict | None = None
        self._handler_uuids: set[str] = set()
        self.record: list | None = None

    def host(self, name: str) -> HostReport:
        if name not in self.hosts:
            self.hosts[name] = HostReport(name)
        return self.hosts[name]

    @staticmethod
    def _task_label(data: dict) -> str:
        task = data.get("task") or data.get("task_action", "?")
        role = data.get("role")
        return f"{role} : {task}" if role and not task.startswith(f"{role} : ") else task

    def __call__(self, event: dict) -> bool:
        self.handle(event)
        if self.record is not None:
            self.record.append(event)
        return True

    def handle(self, event: dict) -> None:
        kind = event.get("event", "")
        data = event.get("event_data") or {}
        # ansible-runner reports a handler starting as playbook_on_task_start with
        # is_conditional set (ansible-core itself always passes False for ordinary tasks).
        if kind == "playbook_on_handler_task_start" or (
            kind == "playbook_on_task_start" and data.get("is_conditional")
        ):
            self._handler_uuids.add(data.get("task_uuid", ""))
            return
        if kind == "playbook_on_stats":
            self.stats = data
            return
        if not kind.startswith("runner_"):
            return
        host = data.get("host")
        res = data.get("res") or result_from_stdout(event.get("stdout", ""))
        # A no_log task's result reaches the event censored down to one key, `changed` gone
        # with the rest; the printed line still carries it (and nothing secret).
        if "censored" in res and "changed" not in res:
            res = {**result_from_stdout(event.get("stdout", "")), **res}
        if not host:
            return
        # A looping task sends one event per item, then an aggregate carrying every item's
        # result under `results`: counting the aggregate too would report each drift twice.
        if kind in ("runner_on_ok", "runner_on_skipped") and isinstance(res.get("results"), list):
            self.host(host)
            return
        report = self.host(host)
        task = self._task_label(data)
        action = data.get("resolved_action") or data.get("task_action") or ""
        item = None
        if kind.startswith("runner_item_"):
            label = res.get("_ansible_item_label", res.get("item"))
            item = label if isinstance(label, str) else json.dumps(label, sort_keys=True)
        path = data.get("task_path", "")
        is_handler = data.get("task_uuid") in self._handler_uuids

        if kind in ("runner_on_ok", "runner_item_on_ok"):
            if not res.get("changed"):
                return
            reason, changed_path = describe_change(action, res)
            if "censored" in res:
                reason = "would change (no_log: the task's details are hidden)"
            finding = Finding(task, action, reason, changed_path or "", item)
            (report.handlers if is_handler else report.drift).append(finding)
        elif kind in ("runner_on_skipped", "runner_item_on_skipped"):
            why = not_judged_reason(res)
            if why:
                report.not_judged.append(Finding(task, action, why, "", item))
        elif kind == "runner_on_failed":
            msg = _short(res.get("msg") or "failed")
            if data.get("ignore_errors"):
                report.not_judged.append(Finding(task, action, f"failed in check mode (ignored): {msg}", path, None))
            else:
                report.failures.append(Finding(task, action, msg, path, None))
        elif kind == "runner_on_unreachable":
            report.failures.append(Finding(task, action, _short(res.get("msg") or "unreachable"), path, None))

    def finish(self) -> dict:
        """The report as a dict, host status settled from the run's final statistics."""
        stats = self.stats or {}
        dark = stats.get("dark") or {}
        failures = stats.get("failures") or {}
        for name in stats.get("processed") or {}:
            self.host(name)
        for name, report in self.hosts.items():
            if dark.get(name):
                report.status = "unreachable"
            elif failures.get(name):
                report.status = "failed"
            elif report.drift:
                report.status = "drift"
            else:
                report.status = "ok"
        statuses = [r.status for r in self.hosts.values()]
        if self.stats is None or not self.hosts:
            # No statistics: the run stopped early. No hosts: the inventory or limit matched
            # nothing, and "no drift" would be a verdict on nothing.
            exit_code = EXIT_FAILED
        elif any(s in ("unreachable", "failed") for s in statuses):
            exit_code = EXIT_FAILED
        elif "drift" in statuses:
            exit_code = EXIT_DRIFT
        else:
            exit_code = EXIT_CLEAN
        hosts = {name: self.hosts[name] for name in sorted(self.hosts)}
        return {
            "summary": {
                "hosts": len(hosts),
                "drifted_hosts": statuses.count("drift"),
                "failed_hosts": statuses.count("failed"),
                "unreachable_hosts": statuses.count("unreachable"),
                "drifted_tasks": sum(len(r.drift) for r in hosts.values()),
                "not_judged_tasks": len({f.label for r in hosts.values() for f in r.not_judged}),
                "run_completed": self.stats is not None,
                "exit_code": exit_code,
            },
            "hosts": {
                name: {
                    "status": r.status,
                    "drift": [_finding_dict(f) for f in r.drift],
                    "not_judged": [_finding_dict(f) for f in r.not_judged],
                    "failures": [_finding_dict(f) for f in r.failures],
                    "handlers_that_would_run": [_finding_dict(f) for f in r.handlers],
                }
                for name, r in hosts.items()
            },
        }


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
        if host["status"] in ("failed", "unreachable") and not host["failures"]:
            rows.append((name, "-", host["status"].upper()))
    return rows


def _not_judged_rows(report: dict) -> list[tuple[str, str, str]]:
    tasks: dict[str, tuple[list, str]] = {}
    for name, host in report["hosts"].items():
        for finding in host["not_judged"]:
            hosts = tasks.setdefault(finding["label"], ([], finding["reason"]))[0]
            hosts.append(name)
    return [(label, _host_list(hosts), why) for label, (hosts, why) in tasks.items()]


def _host_list(hosts: list) -> str:
    return ", ".join(hosts) if len(hosts) <= 4 else f"{len(hosts)} hosts"


def summary_line(report: dict) -> str:
    s = report["summary"]
    if not s["run_completed"]:
        return "The check run did not complete: no verdict (see the output above)."
    if not s["hosts"]:
        return "No host was checked: the inventory or the limit matched nothing."
    return (
        f"{s['hosts']} host(s): {s['drifted_hosts']} drifted ({s['drifted_tasks']} task result(s)), "
        f"{s['failed_hosts']} failed, {s['unreachable_hosts']} unreachable; "
        f"{s['not_judged_tasks']} task(s) not judged in check mode."
    )


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
    out += ["| host | status | drifted | not judged |", "|---|---|---|---|"]
    for name, host in report["hosts"].items():
        out.append(f"| {_md_cell(name)} | {host['status']} | {len(host['drift'])} | {len(host['not_judged'])} |")
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
    return "\n".join(out) + "\n"


def run_check(playbook: Path, inventories: list, limit: str | None, extra_vars: list,
              project_dir: Path, quiet: bool, collector: DriftCollector) -> tuple[dict, str]:
    """Runs the playbook with --check --diff through ansible-runner; returns (report, output)."""
    import ansible_runner  # imported here so the event processing needs no runner installed

    # -v makes the callback print skipped results, the only carrier of why a task was skipped.
    cmdline = ["--check", "--diff", "-v"]
    for inv in inventories:
        cmdline += ["-i", str(Path(inv).resolve())]
    if limit:
        cmdline += ["--limit", limit]
    for ev in extra_vars:
        cmdline += ["-e", ev]
    private = tempfile.mkdtemp(prefix="drift-report.")
    try:
        runner = ansible_runner.run(
            private_data_dir=private,
            project_dir=str(project_dir),
            playbook=str(playbook.resolve()),
            cmdline=" ".join(_quote(a) for a in cmdline),
            event_handler=collector,
            quiet=quiet,
            envvars=dict({k: v for k, v in os.environ.items() if k.startswith("ANSIBLE_")},
                         ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0"),
        )
        output = runner.stdout.read() if runner.stdout else ""
    finally:
        shutil.rmtree(private, ignore_errors=True)
    return collector.finish(), output


def _quote(arg: str) -> str:
    import shlex

    return shlex.quote(arg)


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        # argparse's own status, 2, already means "failed hosts" here.
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def main(argv: list | None = None) -> int:
    default_root = Path(__file__).resolve().parent.parent
    parser = _Parser(
        prog="drift-report",
        description="Run a playbook in check and diff mode against an inventory and report, per "
        "host, the tasks that would change (drift), the tasks check mode cannot judge, and the "
        "hosts that failed. Exit 0: no drift, 1: drift, 2: failed or unreachable hosts, 3: bad "
        "invocation.",
    )
    parser.add_argument("-i", "--inventory", action="append", default=[],
                        help="inventory source (repeatable; required unless --from-events)")
    parser.add_argument("-p", "--playbook", default=str(default_root / "site.yml"),
                        help="playbook to check (default: site.yml of this collection)")
    parser.add_argument("-l", "--limit", help="limit to a host pattern")
    parser.add_argument("-e", "--extra-vars", action="append", default=[],
                        help="extra variables, as for ansible-playbook (repeatable)")
    parser.add_argument("--json", dest="json_path", help="write the report as JSON to this path")
    parser.add_argument("--markdown", dest="md_path", help="write the report as Markdown to this path")
    parser.add_argument("--project-dir",
                        help="directory ansible-playbook runs in, where its ansible.cfg is read "
                        "(default: the current directory, as for ansible-playbook itself)")
    parser.add_argument("--save-events", help="write the run's ansible-runner events (JSON lines) here")
    parser.add_argument("--from-events",
                        help="build the report from events saved by --save-events instead of running")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="also show ansible-playbook's own output")
    args = parser.parse_args(argv)

    collector = DriftCollector()
    if args.from_events:
        with open(args.from_events, encoding="utf-8") as handle:
            for line in handle:
                if line.strip():
                    collector.handle(json.loads(line))
        report, output = collector.finish(), ""
    else:
        playbook = Path(args.playbook)
        if not args.inventory:
            parser.error("an inventory is required (-i)")
        if not playbook.is_file():
            parser.error(f"playbook not found: {playbook}")
        for inv in args.inventory:
            if not Path(inv).exists() and "," not in inv:
                parser.error(f"inventory not found: {inv}")
        project_dir = Path(args.project_dir) if args.project_dir else Path.cwd()
        if args.save_events:
            collector.record = []
        report, output = run_check(playbook, args.inventory, args.limit, args.extra_vars,
                                   project_dir, not args.verbose, collector)
        if args.save_events:
            with open(args.save_events, "w", encoding="utf-8") as handle:
                for event in collector.record:
                    handle.write(json.dumps(event, sort_keys=True) + "\n")
    if not report["summary"]["run_completed"] and not args.verbose:
        # No statistics means ansible-playbook stopped before any host was judged (a syntax
        # error, a missing role): its own output is the only useful explanation.
        sys.stderr.write(output)
    print(render_text(report))
    if args.json_path:
        Path(args.json_path).write_text(json.dumps(report, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    if args.md_path:
        Path(args.md_path).write_text(render_markdown(report), encoding="utf-8")
    return report["summary"]["exit_code"]


if __name__ == "__main__":
    sys.exit(main())
