"""The drift report's event processing, over recorded and generated ansible-runner events.

The recordings in tests/fixtures/drift/ are real runs of tools/drift-report (--save-events)
against two lab nodes converged with tests/integration/fleet/fixture.yml: once converged
(`clean`), once after tampering (`tampered`: node 01 lost the package and its env file went
0644; node 02 had its unit edited and the alternative switched back; a third inventory host
listens nowhere).
"""
from __future__ import annotations

import json
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tools"))
import drift_report  # noqa: E402  pylint: disable=wrong-import-position

FIXTURES = ROOT / "tests" / "fixtures" / "drift"


def replay(name: str) -> dict:
    collector = drift_report.DriftCollector()
    with open(FIXTURES / f"{name}.events.jsonl", encoding="utf-8") as handle:
        for line in handle:
            collector.handle(json.loads(line))
    return collector.finish()


def labels(report: dict, host: str, key: str = "drift") -> list:
    return [f["label"] for f in report["hosts"][host][key]]


def test_converged_fleet_reports_no_drift_and_lists_the_unjudged_task():
    report = replay("fixture-clean")
    assert report["summary"]["exit_code"] == drift_report.EXIT_CLEAN
    assert report["summary"]["drifted_tasks"] == 0
    assert sorted(report["hosts"]) == ["drift-dev-01", "drift-dev-02"]
    for host in report["hosts"].values():
        assert host["status"] == "ok"
        assert host["drift"] == []
        assert [(f["label"], f["reason"]) for f in host["not_judged"]] == [
            ("Ask the service whether it is up",
             "runs only outside check mode (when: not ansible_check_mode)"),
        ]


def test_tampered_fleet_reports_each_drift_on_its_own_host_with_a_reason():
    report = replay("fixture-tampered")
    hosts = report["hosts"]
    assert [(f["label"], f["reason"]) for f in hosts["drift-dev-01"]["drift"]] == [
        ("Install the fixture package", "package would install: fixture-tool"),
        ("Write the fixture environment file", "/etc/default/fixture: mode 0644 -> 0640"),
    ]
    assert [(f["label"], f["reason"]) for f in hosts["drift-dev-02"]["drift"]] == [
        ("Select tool-2 as the current tool",
         "alternatives: Set alternative '/opt/fixture/tool-2' for 'fixture-tool'."),
        ("Install the fixture unit",
         "content of /etc/systemd/system/fixture.service would change (+1 -1 lines)"),
    ]
    # The handler the drift would trigger is a consequence, not a drift of its own.
    assert labels(report, "drift-dev-01", "handlers_that_would_run") == ["Restart fixture"]
    assert hosts["drift-dev-gone"]["status"] == "unreachable"
    assert "port 2399: Connection refused" in hosts["drift-dev-gone"]["failures"][0]["reason"]
    assert report["summary"] == {
        "hosts": 3, "drifted_hosts": 2, "failed_hosts": 0, "unreachable_hosts": 1,
        "drifted_tasks": 4, "not_judged_tasks": 1, "run_completed": True,
        "exit_code": drift_report.EXIT_FAILED,
    }


def test_without_the_unreachable_host_drift_exits_one():
    collector = drift_report.DriftCollector()
    with open(FIXTURES / "fixture-tampered.events.jsonl", encoding="utf-8") as handle:
        for line in handle:
            event = json.loads(line)
            data = event.get("event_data", {})
            if data.get("host") == "drift-dev-gone":
                continue
            if event["event"] == "playbook_on_stats":
                for counts in data.values():
                    if isinstance(counts, dict):
                        counts.pop("drift-dev-gone", None)
            collector.handle(event)
    assert collector.finish()["summary"]["exit_code"] == drift_report.EXIT_DRIFT


# Generated events, shaped as ansible-runner 2.4 emits them.
def ev(kind: str, host: str | None = None, task: str = "T", res: dict | None = None, **data) -> dict:
    event_data = {"task": task, "task_uuid": data.pop("task_uuid", "u-" + task),
                  "task_action": data.pop("action", "ansible.builtin.copy"), **data}
    if host:
        event_data["host"] = host
    if res is not None:
        event_data["res"] = res
    return {"event": kind, "event_data": event_data, "stdout": data.pop("stdout", "")}


def stats(*hosts: str, failures=(), dark=()) -> dict:
    return {"event": "playbook_on_stats", "event_data": {
        "processed": {h: 1 for h in hosts}, "failures": {h: 1 for h in failures},
        "dark": {h: 1 for h in dark}, "ok": {}, "changed": {}, "skipped": {}}}


def collect(*events) -> dict:
    collector = drift_report.DriftCollector()
    for event in events:
        collector.handle(event)
    return collector.finish()


def test_loop_drift_counts_each_changed_item_once_and_skips_the_aggregate():
    items = [{"changed": True, "item": name, "_ansible_item_label": name,
              "diff": {"before": {"path": f"/d/{name}", "mode": "0700"},
                       "after": {"path": f"/d/{name}", "mode": "0755"}}} for name in ("a", "b")]
    unchanged = {"changed": False, "item": "c", "_ansible_item_label": "c"}
    report = collect(
        ev("runner_item_on_ok", "h1", "Make dirs", items[0], action="ansible.builtin.file"),
        ev("runner_item_on_ok", "h1", "Make dirs", unchanged, action="ansible.builtin.file"),
        ev("runner_item_on_ok", "h1", "Make dirs", items[1], action="ansible.builtin.file"),
        ev("runner_on_ok", "h1", "Make dirs", {"changed": True, "results": items + [unchanged]},
           action="ansible.builtin.file"),
        stats("h1"),
    )
    assert [(f["label"], f["reason"]) for f in report["hosts"]["h1"]["drift"]] == [
        ("Make dirs [a]", "/d/a: mode 0700 -> 0755"),
        ("Make dirs [b]", "/d/b: mode 0700 -> 0755"),
    ]
    assert report["summary"]["exit_code"] == drift_report.EXIT_DRIFT


def test_check_mode_skips_are_not_judged_and_ordinary_skips_are_ignored():
    report = collect(
        ev("runner_on_skipped", "h1", "Run it", action="ansible.builtin.command",
           stdout='skipping: [h1] => {"changed": false, "msg": '
                  '"Command would have run if not in check mode", "skipped": true}'),
        ev("runner_on_skipped", "h1", "Optional", action="ansible.builtin.copy",
           stdout='skipping: [h1] => {"changed": false, "false_condition": "x is defined", '
                  '"skip_reason": "Conditional result was False"}'),
        ev("runner_item_on_skipped", "h1", "Per item",
           res={"false_condition": "not ansible_check_mode", "item": 1, "_ansible_item_label": 1}),
        ev("runner_on_skipped", "h1", "Per item",
           res={"results": [], "skipped": True, "msg": "All items skipped"}),
        stats("h1"),
    )
    host = report["hosts"]["h1"]
    assert [(f["label"], f["reason"]) for f in host["not_judged"]] == [
        ("Run it", "Command would have run if not in check mode"),
        ("Per item [1]", "runs only outside check mode (when: not ansible_check_mode)"),
    ]
    assert host["status"] == "ok"
    assert report["summary"]["exit_code"] == drift_report.EXIT_CLEAN


def test_failed_host_exits_two_and_an_ignored_failure_is_not_judged():
    report = collect(
        ev("runner_on_failed", "h1", "Probe", {"msg": "boom"}, ignore_errors=True),
        ev("runner_on_failed", "h2", "Install", {"msg": "No package matching 'x'"}),
        stats("h1", "h2", failures=["h2"]),
    )
    assert report["hosts"]["h1"]["status"] == "ok"
    assert report["hosts"]["h1"]["not_judged"][0]["reason"] == "failed in check mode (ignored): boom"
    assert report["hosts"]["h2"]["status"] == "failed"
    assert report["hosts"]["h2"]["failures"][0]["reason"] == "No package matching 'x'"
    assert report["summary"]["exit_code"] == drift_report.EXIT_FAILED
    assert "h2    Install  FAILED: No package matching 'x'" in drift_report.render_text(report)


def test_a_run_that_never_reached_statistics_is_a_failure_without_verdict():
    report = collect(ev("playbook_on_start"))
    assert report["summary"]["run_completed"] is False
    assert report["summary"]["exit_code"] == drift_report.EXIT_FAILED
    assert drift_report.summary_line(report).startswith("The check run did not complete")


def test_a_run_that_checked_no_host_is_a_failure_not_a_clean_bill():
    report = collect(stats())
    assert report["summary"]["exit_code"] == drift_report.EXIT_FAILED
    assert drift_report.summary_line(report) == (
        "No host was checked: the inventory or the limit matched nothing.")


def test_role_tasks_are_labelled_with_their_role():
    report = collect(ev("runner_on_ok", "h1", "Write unit", {"changed": True, "msg": "x"},
                        role="sglang_service"), stats("h1"))
    assert labels(report, "h1") == ["sglang_service : Write unit"]


@pytest.mark.parametrize("action,res,reason", [
    ("ansible.builtin.apt", {"diff": {"prepared": "The following NEW packages will be installed:\n"
                                      "  tree htop\n0 upgraded, 2 newly installed"}},
     "package would install: tree htop"),
    ("ansible.builtin.apt", {"diff": {"prepared": "The following packages will be REMOVED:\n  tree\n"}},
     "package would remove: tree"),
    ("ansible.builtin.apt", {"diff": {"prepared": "Unpacking x (2.0) over (1.0) ..."}},
     "package would change: x 1.0 -> 2.0"),
    ("ansible.builtin.file", {"diff": {"before": {"path": "/p", "state": "absent"},
                                       "after": {"path": "/p", "state": "directory"}}},
     "/p would be created (directory)"),
    ("ansible.builtin.file", {"diff": {"before": {"path": "/p", "state": "file"},
                                       "after": {"path": "/p", "state": "absent"}}},
     "/p would be removed"),
    ("ansible.builtin.template", {"diff": [{"before": "", "after": "x\n", "before_header": "/etc/u",
                                            "after_header": "u.j2"}]},
     "/etc/u would be created"),
    ("ansible.builtin.copy", {"diff": {"before": "a\nb\n", "after": "a\nc\nd\n",
                                       "before_header": "/etc/f", "after_header": "dynamically generated"}},
     "content of /etc/f would change (+2 -1 lines)"),
    ("ansible.builtin.systemd_service", {"name": "sglang.service", "state": "started", "enabled": True},
     "service sglang.service would change (state=started, enabled=True)"),
    ("blackwell.sglang.sglang_capmap", {}, "sglang_capmap would change (the module reports no diff)"),
])
def test_reasons_are_short_and_name_what_would_change(action, res, reason):
    assert drift_report.describe_change(action, {"changed": True, **res})[0] == reason


def test_result_from_stdout_reads_through_colour_and_item_prefixes():
    text = '\x1b[0;36mskipping: [h] => (item=a) => {"false_condition": "not ansible_check_mode"}\x1b[0m'
    assert drift_report.result_from_stdout(text) == {"false_condition": "not ansible_check_mode"}
    assert drift_report.result_from_stdout("skipping: [h]") == {}


def test_cli_replays_saved_events_into_json_and_markdown(tmp_path, capsys):
    out_json, out_md = tmp_path / "r.json", tmp_path / "r.md"
    code = drift_report.main(["--from-events", str(FIXTURES / "fixture-tampered.events.jsonl"),
                              "--json", str(out_json), "--markdown", str(out_md)])
    assert code == drift_report.EXIT_FAILED
    assert json.loads(out_json.read_text())["summary"]["drifted_tasks"] == 4
    markdown = out_md.read_text()
    assert "| drift-dev-01 | Write the fixture environment file | /etc/default/fixture: mode 0644 -> 0640 |" in markdown
    assert "| Ask the service whether it is up | drift-dev-01, drift-dev-02 |" in markdown
    assert "drift-dev-02    Install the fixture unit" in capsys.readouterr().out


def test_cli_rejects_a_missing_playbook_before_running_anything(tmp_path, capsys):
    inventory = tmp_path / "hosts"
    inventory.write_text("h1\n")
    with pytest.raises(SystemExit) as exc:
        drift_report.main(["-i", str(inventory), "-p", str(tmp_path / "nope.yml")])
    assert exc.value.code == drift_report.EXIT_USAGE
    assert f"drift-report: error: playbook not found: {tmp_path / 'nope.yml'}" in capsys.readouterr().err


def test_a_no_log_task_that_would_change_is_drift_and_its_result_stays_hidden():
    censored = {"censored": "the output has been hidden due to the fact that 'no_log: true' was "
                            "specified for this result"}
    printed = ('changed: [h1] => {"censored": "the output has been hidden due to the fact that '
               '\'no_log: true\' was specified for this result", "changed": %s}')
    report = collect(
        ev("runner_on_ok", "h1", "Write the secrets file", dict(censored),
           action="ansible.builtin.template", stdout=printed % "true"),
        ev("runner_on_ok", "h2", "Write the secrets file", dict(censored),
           action="ansible.builtin.template", stdout=printed.replace("changed:", "ok:") % "false"),
        stats("h1", "h2"),
    )
    assert labels(report, "h1") == ["Write the secrets file"]
    assert labels(report, "h2") == []
    assert report["hosts"]["h1"]["status"] == "drift"
    assert report["hosts"]["h2"]["status"] == "ok"
    assert report["hosts"]["h1"]["drift"][0]["reason"] == (
        "would change (no_log: the task's details are hidden)")
