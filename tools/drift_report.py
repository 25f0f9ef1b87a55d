"""Fleet drift report: a playbook run in check and diff mode, reduced to host x drifted task.

`tools/drift-report` runs this file with the collection's virtualenv, or with the python3 on
PATH that has ansible-runner (an installed collection). The run goes through ansible-runner
with the callback plugin blackwell.sglang.drift_report enabled; the plugin reduces the task
results and writes the report as JSON, which this CLI prints and writes out. The reduction
lives once, in plugins/plugin_utils/drift.py: the CLI and the callback cannot disagree.
`--merge` runs nothing: it joins the verdicts several jobs published (the slices of a sliced AWX
job, from ansible-runner's artifact directories or AWX's job events and jobs) into one report.

Exit codes: 0 every selected host was checked, judged and is clean, 1 drift, 2 a host failed,
was unreachable, was not checked or not judged (or the run itself did not complete), 3 bad invocation
(nothing was run).
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sys
import tempfile
from pathlib import Path

CALLBACK = "blackwell.sglang.drift_report"
# The list this CLI passes replaces ansible.cfg's callbacks_enabled: the freeze goes with it.
GC_FREEZE = "blackwell.sglang.gc_freeze"
ROOT = Path(__file__).resolve().parent.parent


def _import_drift():
    """plugin_utils.drift of the collection Ansible resolves blackwell.sglang to."""
    candidates = []
    # Installed, this file sits at <base>/ansible_collections/blackwell/sglang/tools/.
    if ROOT.parent.parent.name == "ansible_collections":
        candidates.append(str(ROOT.parent.parent.parent))
    candidates += [p for p in os.environ.get("ANSIBLE_COLLECTIONS_PATH", "").split(os.pathsep) if p]
    for path in reversed(candidates):
        path = os.path.expanduser(path)
        if path not in sys.path:
            sys.path.insert(0, path)
    # pylint: disable-next=import-outside-toplevel
    from ansible_collections.blackwell.sglang.plugins.plugin_utils import drift as module

    return module


drift = _import_drift()
EXIT_CLEAN, EXIT_DRIFT, EXIT_FAILED, EXIT_USAGE = (
    drift.EXIT_CLEAN, drift.EXIT_DRIFT, drift.EXIT_FAILED, drift.EXIT_USAGE)


def run_check(playbook: Path, inventories: list, limit: str | None, extra_vars: list,
              project_dir: Path, quiet: bool, events_path: str | None) -> tuple[dict, str]:
    """Runs the playbook with --check --diff through ansible-runner with the callback enabled;
    returns (the callback's report, ansible-playbook's output)."""
    import ansible_runner  # pylint: disable=import-outside-toplevel

    cmdline = ["--check", "--diff"]
    for inv in inventories:
        cmdline += ["-i", str(Path(inv).resolve()) if Path(inv).exists() else inv]
    if limit:
        cmdline += ["--limit", limit]
    for ev in extra_vars:
        cmdline += ["-e", ev]
    private = tempfile.mkdtemp(prefix="drift-report.")
    report_path = Path(private) / "drift-report.json"
    enabled = [c for c in os.environ.get("ANSIBLE_CALLBACKS_ENABLED", "").split(",") if c.strip()]
    # ansible-runner brings its own stdout callback (awx_display) and the path to it; copies of
    # an outer runner's (this CLI run by ansible-navigator exec, or by ansible-runner itself)
    # point at another runner's copy and break this one.
    envvars = {k: v for k, v in os.environ.items()
               if k.startswith("ANSIBLE_") and k not in ("ANSIBLE_STDOUT_CALLBACK", "ANSIBLE_CALLBACK_PLUGINS")}
    envvars.update(
        ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
        ANSIBLE_CALLBACKS_ENABLED=",".join([*enabled, *(c for c in (GC_FREEZE, CALLBACK) if c not in enabled)]),
        BLACKWELL_DRIFT_REPORT_JSON=str(report_path),
        # This CLI prints the table itself, from the same report.
        BLACKWELL_DRIFT_REPORT_PRINT="false",
    )
    if events_path:
        envvars["BLACKWELL_DRIFT_REPORT_EVENTS"] = str(Path(events_path).resolve())
    try:
        runner = ansible_runner.run(
            private_data_dir=private,
            project_dir=str(project_dir),
            playbook=str(playbook.resolve()),
            cmdline=" ".join(shlex.quote(a) for a in cmdline),
            quiet=quiet,
            envvars=envvars,
            # ansible-runner would point the fact cache into its private directory, removed
            # below: the run uses the cache ansible.cfg or the environment names, as
            # ansible-playbook does (warm facts, and what the last converge cached).
            fact_cache_type="none",
        )
        output = runner.stdout.read() if runner.stdout else ""
        # No report: ansible-playbook stopped before its recap (a syntax error, a missing
        # role, an empty host list), and there is no verdict on any host.
        report = json.loads(report_path.read_text(encoding="utf-8")) if report_path.exists() \
            else drift.incomplete_report()
    finally:
        shutil.rmtree(private, ignore_errors=True)
    return report, output


def load_jobs(sources: list) -> dict:
    """Each source's job, for drift.merge: where it came from to its verdicts and recap.

    A source is an ansible-runner private data directory (each run under artifacts/), one run's
    artifact directory (artifacts/<ident>) or its job_events directory, or a JSON file: AWX's
    job events as its API lists them (/api/v2/jobs/<id>/job_events/, the page's ``results`` or a
    list of events) or a job as its API shows it (/api/v2/jobs/<id>/, its ``artifacts``).
    Raises drift.MergeError for a source that holds no job."""
    jobs = {}
    for source in sources:
        path = Path(source)
        if path.is_dir():
            if (path / "artifacts").is_dir():
                runs = sorted(d for d in (path / "artifacts").iterdir() if (d / "job_events").is_dir())
            elif (path / "job_events").is_dir():
                runs = [path]
            else:
                runs = [path.parent] if path.name == "job_events" else []
            if not runs:
                raise drift.MergeError(f"{source}: no ansible-runner job events under it")
            if len(runs) > 1:
                raise drift.MergeError(f"{source}: holds {len(runs)} runs under artifacts/; name the artifact "
                                       "directory (artifacts/<ident>) of each run to merge")
            # drift.job_of_events puts the events in their order (their counter).
            try:
                events = [json.loads(f.read_text(encoding="utf-8")) for f in (runs[0] / "job_events").glob("*.json")]
            except ValueError as exc:
                raise drift.MergeError(f"{runs[0]}: an event that is not JSON ({exc})") from exc
            jobs[str(runs[0])] = drift.job_of_events(events)
            continue
        if not path.is_file():
            raise drift.MergeError(f"{source}: no such file or directory")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise drift.MergeError(f"{source}: not JSON ({exc})") from exc
        if isinstance(data, dict) and isinstance(data.get("artifacts"), dict):
            # A job's detail: its artifacts, without the recap.
            jobs[source] = {"artifacts": data["artifacts"], "recap": None}
        elif isinstance(data, dict) and isinstance(data.get("results"), list):
            if data.get("next"):
                raise drift.MergeError(f"{source}: one page of a job's events ({len(data['results'])} of "
                                       f"{data.get('count', '?')}); export them all, e.g. with page_size above the count")
            jobs[source] = drift.job_of_events(data["results"])
        elif isinstance(data, list):
            jobs[source] = drift.job_of_events(data)
        else:
            raise drift.MergeError(f"{source}: neither a job's events nor a job with its artifacts")
    return jobs


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        # argparse's own status, 2, already means "failed hosts" here.
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def main(argv: list | None = None) -> int:
    parser = _Parser(
        prog="drift-report",
        description="Run a playbook in check and diff mode against an inventory and report, per "
        "host, the tasks that would change (drift), the tasks check mode cannot judge, and the "
        "hosts that failed, were unreachable or were not checked because the run stopped. "
        "Exit 0: every selected host checked, judged and clean, 1: drift, 2: a host failed, was "
        "unreachable, not checked or not judged in check mode, 3: bad invocation.",
    )
    parser.add_argument("-i", "--inventory", action="append", default=[],
                        help="inventory source (repeatable; required unless --from-events)")
    parser.add_argument("-p", "--playbook", default=str(ROOT / "site.yml"),
                        help="playbook to check (default: site.yml of this collection)")
    parser.add_argument("-l", "--limit", help="limit to a host pattern")
    parser.add_argument("-e", "--extra-vars", action="append", default=[],
                        help="extra variables, as for ansible-playbook (repeatable)")
    parser.add_argument("--json", dest="json_path", help="write the report as JSON to this path")
    parser.add_argument("--markdown", dest="md_path", help="write the report as Markdown to this path")
    parser.add_argument("--project-dir",
                        help="directory ansible-playbook runs in, where its ansible.cfg is read "
                        "(default: the current directory, as for ansible-playbook itself)")
    parser.add_argument("--save-events",
                        help="write the structured events the report is built from (JSON lines) here")
    parser.add_argument("--from-events",
                        help="build the report from events saved by --save-events instead of running")
    parser.add_argument("--merge", nargs="+", metavar="JOB",
                        help="build one report from the verdicts several jobs published instead of "
                        "running (the slices of a sliced AWX job): ansible-runner private data or "
                        "artifact directories, AWX job events or jobs exported from its API as JSON")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="also show ansible-playbook's own output")
    args = parser.parse_args(argv)

    if args.merge:
        given = [flag for flag, value in (("-i", args.inventory), ("-l", args.limit), ("-e", args.extra_vars),
                                          ("--from-events", args.from_events), ("--save-events", args.save_events),
                                          ("--project-dir", args.project_dir),
                                          ("-p", args.playbook != parser.get_default("playbook")))
                 if value]
        if given:
            parser.error(f"--merge runs no playbook: {', '.join(given)} cannot go with it")
        try:
            report = drift.merge(load_jobs(args.merge))
        except drift.MergeError as exc:
            parser.error(str(exc))
        output = ""
    elif args.from_events:
        if not Path(args.from_events).is_file():
            parser.error(f"events file not found: {args.from_events}")
        with open(args.from_events, encoding="utf-8") as handle:
            report = drift.replay(json.loads(line) for line in handle if line.strip())
        output = ""
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
        report, output = run_check(playbook, args.inventory, args.limit, args.extra_vars,
                                   project_dir, not args.verbose, args.save_events)
    if not report["summary"]["run_completed"] and not args.verbose:
        # No recap means ansible-playbook stopped before any host was judged: its own output
        # is the only useful explanation.
        sys.stderr.write(output)
    print(drift.render_text(report))
    if args.json_path:
        Path(args.json_path).write_text(drift.render_json(report), encoding="utf-8")
    if args.md_path:
        Path(args.md_path).write_text(drift.render_markdown(report), encoding="utf-8")
    return report["summary"]["exit_code"]


if __name__ == "__main__":
    sys.exit(main())
