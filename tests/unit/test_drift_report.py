"""The drift report's reduction (plugins/plugin_utils/drift.py) and the CLI's offline paths.

The recordings in tests/fixtures/drift/ are real runs of tests/fixtures/drift/check.yml in
check mode on hosts a-d over the local connection, with the callback's events_path option set:
- stopped-converge: a, b and c drift; c then fails in the serial converge play, whose
  max_fail_percentage 0 stops the run before d's batch;
- stopped-preflight: b fails the any_errors_fatal preflight, no host reaches the converge;
- unreachable: a drifts, `gone` (ssh to a closed loopback port) is unreachable.
The other cases are generated events, shaped as the callback emits them.
"""
from __future__ import annotations

import json
import sys

import pytest
import yaml

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tools"))
import drift_report  # noqa: E402  pylint: disable=wrong-import-position
from ansible_collections.blackwell.sglang.plugins.plugin_utils import drift  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "drift"
CONVERGE = "Converge the hosts one at a time"
PREFLIGHT = "Check the hosts before anything changes"
NO_LOG = "would change (no_log: the task's details are hidden)"


def recorded(name: str) -> dict:
    with open(FIXTURES / f"{name}.events.jsonl", encoding="utf-8") as handle:
        return drift.replay(json.loads(line) for line in handle if line.strip())


def pairs(report: dict, host: str, key: str = "drift") -> list:
    return [(f["label"], f["reason"]) for f in report["hosts"][host][key]]


def drift_of(host: str) -> list:
    return [
        ("Write the service configuration", f"/tmp/drift-fixture/{host}.conf would be created"),
        ("Write the secrets file", NO_LOG),
        ("Make the data directories [cache]", f"/tmp/drift-fixture/{host}-cache would be created (directory)"),
        ("Make the data directories [models]", f"/tmp/drift-fixture/{host}-models would be created (directory)"),
    ]


def test_a_run_stopped_by_max_fail_percentage_keeps_drift_and_names_who_stopped_it():
    report = recorded("stopped-converge")
    hosts = report["hosts"]
    assert {name: (h["status"], h["reason"]) for name, h in hosts.items()} == {
        "a": ("drift", ""),
        "b": ("drift", ""),
        # c drifted, then failed: its drift stays in the report.
        "c": ("failed", ""),
        # d's batch never started.
        "d": ("not checked", f"the run stopped after c failed 'gate : Stop where asked' in play "
                             f"'{CONVERGE}' (max_fail_percentage: 0)"),
    }
    for name in "abc":
        assert pairs(report, name) == drift_of(name), name
    assert pairs(report, "c", "failures") == [("gate : Stop where asked", "c broke during the converge")]
    assert pairs(report, "d") == []
    # The handler the drift notifies is a consequence, not drift; c failed before handlers ran.
    assert [f["label"] for f in hosts["a"]["handlers_that_would_run"]] == ["Restart the service"]
    assert hosts["c"]["handlers_that_would_run"] == []
    assert pairs(report, "a", "not_judged") == [
        ("Reload the unit files", "Command would have run if not in check mode"),
        ("Ask the service whether it is up", "runs only outside check mode (when: not ansible_check_mode)"),
    ]
    assert report["summary"] == {
        "hosts": 4, "ok_hosts": 0, "drifted_hosts": 3, "failed_hosts": 1, "unreachable_hosts": 0,
        "not_checked_hosts": 1, "not_judged_hosts": 0, "drifted_tasks": 12, "not_judged_tasks": 2, "check_mode": True,
        "run_completed": True, "exit_code": drift.EXIT_FAILED,
    }
    text = drift.render_text(report)
    assert ("d     -                                   NOT CHECKED: the run stopped after c failed "
            "'gate : Stop where asked'") in text
    assert text.endswith("4 host(s): 0 ok, 3 with drift (12 task result(s)), 1 failed, "
                         "0 unreachable, 1 not checked, 0 not judged; 2 task(s) not judged in check mode.")


def test_a_failed_preflight_leaves_every_other_host_not_checked():
    report = recorded("stopped-preflight")
    reason = (f"the run stopped after b failed 'Require the host to be ready' in play "
              f"'{PREFLIGHT}' (any_errors_fatal)")
    assert {name: (h["status"], h["reason"]) for name, h in report["hosts"].items()} == {
        "a": ("not checked", reason), "b": ("failed", ""),
        "c": ("not checked", reason), "d": ("not checked", reason),
    }
    assert report["summary"]["exit_code"] == drift.EXIT_FAILED
    assert report["summary"]["ok_hosts"] == 0
    markdown = drift.render_markdown(report)
    assert f"| a | not checked | 0 | 0 | {reason} |" in markdown


def test_an_unreachable_host_is_reported_with_the_connection_error():
    report = recorded("unreachable")
    assert report["hosts"]["a"]["status"] == "drift"
    assert pairs(report, "a") == drift_of("a")
    gone = report["hosts"]["gone"]
    assert gone["status"] == "unreachable"
    assert gone["failures"][0]["reason"].endswith(
        "ssh: connect to host 127.0.0.1 port 1: Connection refused")
    assert report["summary"]["exit_code"] == drift.EXIT_FAILED


# Generated events, shaped as the callback emits them.
def play(name="P", hosts=("h1",), batch=None, play_id=None, max_fail=None) -> dict:
    return {"event": "play_start", "play_id": play_id or f"id-{name}", "play": name,
            "selected": list(hosts), "batch": list(hosts if batch is None else batch),
            "max_fail_percentage": max_fail}


def result(kind: str, host: str, task: str = "T", res: dict | None = None, **fields) -> dict:
    return {"event": "result", "kind": kind, "host": host, "task": task,
            "action": fields.pop("action", "ansible.builtin.copy"), "res": res or {}, **fields}


def stats(*hosts: str, failures=(), dark=()) -> dict:
    return {"event": "stats", "processed": {h: 1 for h in hosts},
            "failures": {h: 1 for h in failures}, "dark": {h: 1 for h in dark}}


def start(plays: int = 1) -> dict:
    return {"event": "playbook_start", "plays": plays, "check_mode": True}


def test_loop_drift_counts_each_changed_item_once_and_skips_the_aggregate():
    items = [{"changed": True, "item": name, "_ansible_item_label": name,
              "diff": {"before": {"path": f"/d/{name}", "mode": "0700"},
                       "after": {"path": f"/d/{name}", "mode": "0755"}}} for name in ("a", "b")]
    unchanged = {"changed": False, "item": "c", "_ansible_item_label": "c"}
    report = drift.replay([
        start(), play(),
        result("item_ok", "h1", "Make dirs", items[0], action="ansible.builtin.file"),
        result("item_ok", "h1", "Make dirs", unchanged, action="ansible.builtin.file"),
        result("item_ok", "h1", "Make dirs", items[1], action="ansible.builtin.file"),
        result("ok", "h1", "Make dirs", {"changed": True}, loop=True, action="ansible.builtin.file"),
        stats("h1"),
    ])
    assert pairs(report, "h1") == [("Make dirs [a]", "/d/a: mode 0700 -> 0755"),
                                   ("Make dirs [b]", "/d/b: mode 0700 -> 0755")]
    assert report["summary"]["exit_code"] == drift.EXIT_DRIFT


def test_check_mode_skips_are_not_judged_and_ordinary_skips_are_ignored():
    """A host whose check skipped decisions because it is a check is `not judged` (exit 2), never
    `ok`: a real run could still change or fail there."""
    report = drift.replay([
        start(), play(),
        result("skipped", "h1", "Run it", {"msg": "Command would have run if not in check mode"},
               action="ansible.builtin.command"),
        result("skipped", "h1", "Optional", {"false_condition": "x is defined",
                                             "skip_reason": "Conditional result was False"}),
        result("item_skipped", "h1", "Per item",
               {"false_condition": "not ansible_check_mode", "item": 1, "_ansible_item_label": 1},
               check_guard="not ansible_check_mode"),
        result("skipped", "h1", "Per item", {"msg": "All items skipped"}, loop=True),
        # Not marked: an ordinary skip, though its condition names check mode.
        result("skipped", "h1", "Unmarked", {"false_condition": "not ansible_check_mode"}),
        # Marked, but skipped on a condition before its guard: its plan did not ask for it.
        result("skipped", "h1", "Not asked", {"false_condition": "'step' in plan"},
               check_guard="not ansible_check_mode"),
        stats("h1"),
    ])
    assert pairs(report, "h1", "not_judged") == [
        ("Run it", "Command would have run if not in check mode"),
        ("Per item [1]", "runs only outside check mode (when: not ansible_check_mode)"),
    ]
    assert (report["hosts"]["h1"]["status"], report["hosts"]["h1"]["reason"]) == (
        "not judged", "check mode could not judge 2 decision(s), the first 'Run it': Command would have run "
                      "if not in check mode")
    assert report["summary"]["exit_code"] == drift.EXIT_FAILED
    assert report["summary"]["not_judged_hosts"] == 1
    text = drift.render_text(report)
    assert text.splitlines()[:2] == [
        "HOST  TASK  REASON",
        "h1    -     NOT JUDGED: check mode could not judge 2 decision(s), the first 'Run it': Command "
        "would have run if not in check mode"]
    assert text.endswith("1 host(s): 0 ok, 0 with drift (0 task result(s)), 0 failed, 0 unreachable, "
                         "0 not checked, 1 not judged; 2 task(s) not judged in check mode.")
    assert "| h1 | not judged | 0 | 2 | check mode could not judge" in drift.render_markdown(report)


def test_the_guard_is_the_marked_tasks_last_condition():
    assert drift.check_guard(["x", drift.NOT_JUDGED_TAG], ["'step' in plan", "not ansible_check_mode"]) == (
        "not ansible_check_mode")
    assert drift.check_guard(["x"], ["'step' in plan", "not ansible_check_mode"]) == ""
    assert drift.check_guard([drift.NOT_JUDGED_TAG], []) == ""
    assert drift.not_judged_reason({"false_condition": "plan.judged"}, "plan.judged") == (
        "runs only outside check mode (when: plan.judged)")
    assert drift.not_judged_reason({"false_condition": "not ansible_check_mode"}) is None
    # A marked no_log task's skip hides its condition: not judged, never passed over.
    assert drift.not_judged_reason({"censored": "hidden"}, "not ansible_check_mode") == (
        "runs only outside check mode (when: not ansible_check_mode; no_log hides whether that was the condition)")
    assert drift.not_judged_reason({"censored": "hidden"}) is None


def test_a_drifting_host_stays_drift_and_a_real_run_is_never_not_judged():
    skipped = result("skipped", "h1", "Run it", {"msg": "Command would have run if not in check mode"},
                     action="ansible.builtin.command")
    drifting = drift.replay([start(), play(), result("ok", "h1", "Write", {"changed": True, "msg": "x"}),
                             skipped, stats("h1")])
    assert drifting["hosts"]["h1"]["status"] == "drift"
    assert drifting["summary"]["exit_code"] == drift.EXIT_DRIFT
    real = drift.replay([{"event": "playbook_start", "plays": 1, "check_mode": False}, play(),
                         result("skipped", "h1", "Only in a check", {"false_condition": "ansible_check_mode"}),
                         stats("h1")])
    assert real["hosts"]["h1"]["status"] == "ok"
    assert real["summary"]["exit_code"] == drift.EXIT_CLEAN


HW_TASK = "Warn about PCIe links, peer-to-peer, persistence and the IOMMU"
STATE_TASK = "sglang_service : Read the state of sglang"


def notes(**topics) -> dict:
    return {"ansible_facts": {drift.NOTES_FACT: topics}}


def test_notes_sit_beside_the_verdict_and_never_change_it():
    """Any task's result that carries the notes fact gives its host notes, topic by topic: the
    preflight's PCIe findings (a list), an engine still loading (a string). Warnings are not the
    report's business, whatever their prefix."""
    h1 = ["GPU6, GPU7: persistence mode is off", "GPU5 Gen4 x8 of Gen5 x16"]
    loading = "sglang.service has been loading for 42 s of the 1200 s it is given (/health: 503)"
    report = drift.replay([
        start(), play(hosts=("h1", "h2", "h3")),
        result("ok", "h1", HW_TASK, drift.slim_result({"changed": False, **notes(pcie=h1),
                                                       "warnings": ["hardware: " + h1[0], "note: x"]}),
               action="ansible.builtin.set_fact"),
        result("ok", "h2", HW_TASK, drift.slim_result({"changed": False, **notes(pcie=h1[0])}),
               action="ansible.builtin.set_fact"),
        result("skipped", "h3", HW_TASK, {"false_condition": "__sglang_preflight_pcie_findings | length > 0"}),
        result("ok", "h2", STATE_TASK, drift.slim_result({"changed": False, **notes(engine=loading, nccl_smoke=None)}),
               action="blackwell.sglang.sglang_service_info"),
        stats("h1", "h2", "h3"),
    ])
    hosts = report["hosts"]
    assert {h: hosts[h]["notes"] for h in hosts} == {
        "h1": {"pcie": h1}, "h2": {"pcie": [h1[0]], "engine": [loading]}, "h3": {}}
    assert [hosts[h]["status"] for h in ("h1", "h2", "h3")] == ["ok", "ok", "ok"]
    assert all(hosts[h]["not_judged"] == [] for h in hosts)
    assert report["summary"]["exit_code"] == drift.EXIT_CLEAN
    assert drift.render_text(report).splitlines()[:7] == [
        "No drift.",
        "",
        "Notes:",
        "HOST  TOPIC   NOTE",
        f"h1    pcie    {h1[0]}",
        f"h1    pcie    {h1[1]}",
        f"h2    pcie    {h1[0]}",
    ]
    markdown = drift.render_markdown(report)
    assert f"| h2 | engine | {loading} |" in markdown.split("## Notes")[1]


def test_the_last_value_of_a_topic_stands_and_an_empty_one_removes_it():
    report = drift.replay([
        start(), play(hosts=("h1",)),
        result("ok", "h1", "Test", drift.slim_result(notes(nccl_smoke="FAILED: a hang", engine="loading"))),
        result("ok", "h1", "Test again", drift.slim_result(notes(nccl_smoke="passed: 297.2 GB/s", engine=""))),
        # A skipped task's facts are no note.
        result("skipped", "h1", "Not run", drift.slim_result(notes(other="x"))),
        stats("h1"),
    ])
    assert report["hosts"]["h1"]["notes"] == {"nccl_smoke": ["passed: 297.2 GB/s"]}


def test_slim_result_keeps_the_notes_as_lines_and_no_warnings():
    slim = drift.slim_result({"changed": False, "stdout": "x", "warnings": ["hardware: GPU0: persistence mode is off"],
                              "ansible_facts": {drift.NOTES_FACT: {"a": "one  line\n", "b": ["x", "", "y"], "c": None},
                                                "other": 1}})
    assert slim == {"changed": False, "notes": {"a": ["one line"], "b": ["x", "y"], "c": []}}


def test_failed_host_exits_two_and_an_ignored_failure_is_not_judged():
    report = drift.replay([
        start(), play(hosts=("h1", "h2")),
        result("failed", "h1", "Probe", {"msg": "boom"}, ignore_errors=True),
        result("failed", "h2", "Install", {"msg": "No package matching 'x'"}),
        stats("h1", "h2", failures=["h2"]),
    ])
    assert report["hosts"]["h1"]["status"] == "not judged"
    assert pairs(report, "h1", "not_judged") == [("Probe", "failed in check mode (ignored): boom")]
    assert report["hosts"]["h2"]["status"] == "failed"
    assert pairs(report, "h2", "failures") == [("Install", "No package matching 'x'")]
    assert report["summary"]["exit_code"] == drift.EXIT_FAILED
    assert "h2    Install  FAILED: No package matching 'x'" in drift.render_text(report)


def test_a_failure_a_rescue_handled_is_not_a_failed_host():
    report = drift.replay([start(), play(), result("failed", "h1", "Try", {"msg": "no"}), stats("h1")])
    assert report["hosts"]["h1"]["status"] == "not judged"
    assert pairs(report, "h1", "not_judged") == [("Try", "failed in check mode (rescued): no")]


def test_a_host_that_fails_after_a_rescue_is_stopped_by_its_last_failure():
    report = drift.replay([
        start(), play(hosts=("h1", "h2"), batch=("h1",), max_fail=0),
        result("failed", "h1", "Install", {"msg": "no such release"}),
        result("ok", "h1", "Forget the request", {"changed": False}),
        result("failed", "h1", "Fail with the reason", {"msg": "install failed"}),
        {"event": "no_hosts_remaining"},
        stats("h1", failures=["h1"]),
    ])
    assert report["hosts"]["h2"]["reason"] == (
        "the run stopped after h1 failed 'Fail with the reason' in play 'P' (max_fail_percentage: 0)")
    assert pairs(report, "h1", "failures") == [("Fail with the reason", "install failed")]
    assert pairs(report, "h1", "not_judged") == [("Install", "failed, then rescued: no such release")]


def test_max_fail_percentage_stops_the_rest_of_the_batch_and_the_batches_after_it():
    report = drift.replay([
        start(), play(hosts=("h1", "h2", "h3"), batch=("h1", "h2"), max_fail=0),
        result("ok", "h1", "Write", {"changed": True, "msg": "x"}),
        result("ok", "h2", "Write", {"changed": False}),
        result("failed", "h1", "Gate", {"msg": "unhealthy"}),
        {"event": "no_hosts_remaining"},
        stats("h1", "h2", failures=["h1"]),
    ])
    reason = "the run stopped after h1 failed 'Gate' in play 'P' (max_fail_percentage: 0)"
    assert {n: (h["status"], h["reason"]) for n, h in report["hosts"].items()} == {
        "h1": ("failed", ""), "h2": ("not checked", reason), "h3": ("not checked", reason)}
    assert pairs(report, "h1") == [("Write", "copy: x")]
    assert report["summary"]["drifted_hosts"] == 1


def test_a_play_that_never_started_leaves_its_hosts_not_checked():
    report = drift.replay([
        start(plays=2), play("First", hosts=("h1",)), result("ok", "h1"),
        {"event": "unstarted_play", "play_id": "id-Second", "play": "Second", "selected": ["h1", "h9"]},
        stats("h1"),
    ])
    assert {n: (h["status"], h["reason"]) for n, h in report["hosts"].items()} == {
        "h1": ("not checked", "the run ended before play 'Second' reached it"),
        "h9": ("not checked", "the run ended before play 'Second' reached it")}
    # A play whose hosts could not be resolved still did not run.
    report = drift.replay([
        start(plays=2), play("First"), result("ok", "h1"),
        {"event": "unstarted_play", "play_id": "id-Second", "play": "Second", "selected": None},
        stats("h1"),
    ])
    assert report["hosts"]["h1"]["reason"] == "the run ended before play 'Second' started"


def test_every_selected_host_appears_once_even_without_a_result():
    report = drift.replay([start(), play(hosts=("h1", "h2")), result("ok", "h1"), stats("h1", "h2")])
    assert sorted(report["hosts"]) == ["h1", "h2"]
    assert [h["status"] for h in report["hosts"].values()] == ["ok", "ok"]
    assert report["summary"]["exit_code"] == drift.EXIT_CLEAN


def test_a_run_that_never_reached_its_recap_has_no_verdict():
    report = drift.replay([start(), play(), result("ok", "h1", res={"changed": True})])
    assert report["summary"]["run_completed"] is False
    assert report["hosts"]["h1"]["status"] == "not checked"
    assert report["hosts"]["h1"]["reason"] == "the run did not complete (no play recap)"
    assert report["summary"]["exit_code"] == drift.EXIT_FAILED
    assert drift.summary_line(drift.incomplete_report()).startswith("The check run did not complete")


def test_a_run_that_checked_no_host_is_a_failure_not_a_clean_bill():
    report = drift.replay([start(), play(hosts=()), stats()])
    assert report["summary"]["exit_code"] == drift.EXIT_FAILED
    assert drift.summary_line(report) == "No host was checked: the inventory or the limit matched nothing."


def test_a_run_outside_check_mode_says_its_drift_was_applied():
    report = drift.replay([{"event": "playbook_start", "plays": 1, "check_mode": False}, play(),
                           result("ok", "h1", res={"changed": True}), stats("h1")])
    assert drift.summary_line(report).endswith("Not a check run: what is listed as drift was changed.")


def test_role_tasks_are_labelled_with_their_role():
    report = drift.replay([start(), play(), result("ok", "h1", "Write unit", {"changed": True, "msg": "x"},
                                                   role="sglang_service"), stats("h1")])
    assert [f["label"] for f in report["hosts"]["h1"]["drift"]] == ["sglang_service : Write unit"]


def test_a_no_log_task_that_would_change_is_drift_and_its_result_stays_hidden():
    censored = {"censored": "the output has been hidden due to the fact that 'no_log: true' was "
                            "specified for this result"}
    report = drift.replay([
        start(), play(hosts=("h1", "h2")),
        result("ok", "h1", "Write the secrets file", {**censored, "changed": True}),
        result("ok", "h2", "Write the secrets file", {**censored, "changed": False}),
        stats("h1", "h2"),
    ])
    assert pairs(report, "h1") == [("Write the secrets file", NO_LOG)]
    assert pairs(report, "h2") == []
    assert [report["hosts"][h]["status"] for h in ("h1", "h2")] == ["drift", "ok"]


def test_a_no_log_loop_item_keeps_the_tasks_label_not_a_null_item():
    # A censored loop item carries neither its item nor its label.
    censored = {"censored": "the output has been hidden due to the fact that 'no_log: true' was "
                            "specified for this result", "changed": True}
    report = drift.replay([start(), play(), result("item_ok", "h1", "Write the secrets file", censored),
                           stats("h1")])
    assert pairs(report, "h1") == [("Write the secrets file", NO_LOG)]


def test_slim_result_keeps_only_what_the_report_reads():
    assert drift.slim_result({"changed": True, "stdout": "secret", "diff": {"before": "a"},
                              "invocation": {"module_args": {}}}) == {"changed": True, "diff": {"before": "a"}}


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
    assert drift.describe_change(action, {"changed": True, **res})[0] == reason


def test_cli_rebuilds_json_and_markdown_from_saved_events(tmp_path, capsys):
    out_json, out_md = tmp_path / "r.json", tmp_path / "r.md"
    code = drift_report.main(["--from-events", str(FIXTURES / "stopped-converge.events.jsonl"),
                              "--json", str(out_json), "--markdown", str(out_md)])
    assert code == drift.EXIT_FAILED
    assert json.loads(out_json.read_text()) == recorded("stopped-converge")
    markdown = out_md.read_text()
    assert "| c | Write the secrets file | would change (no_log: the task's details are hidden) |" in markdown
    assert "| Reload the unit files | a, b, c | Command would have run if not in check mode |" in markdown
    assert capsys.readouterr().out == drift.render_text(recorded("stopped-converge")) + "\n"


def test_cli_rejects_a_missing_playbook_before_running_anything(tmp_path, capsys):
    inventory = tmp_path / "hosts"
    inventory.write_text("h1\n")
    with pytest.raises(SystemExit) as exc:
        drift_report.main(["-i", str(inventory), "-p", str(tmp_path / "nope.yml")])
    assert exc.value.code == drift.EXIT_USAGE
    assert f"drift-report: error: playbook not found: {tmp_path / 'nope.yml'}" in capsys.readouterr().err


def test_cli_rejects_a_missing_events_file(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        drift_report.main(["--from-events", str(tmp_path / "none.jsonl")])
    assert exc.value.code == drift.EXIT_USAGE
    assert f"drift-report: error: events file not found: {tmp_path / 'none.jsonl'}" in capsys.readouterr().err


def test_slim_result_takes_a_missing_dest_from_the_task_arguments():
    created = {"changed": True, "diff": [{"before": "", "after": "x\n", "after_header": "/root/.ansible/tmp/a/t.j2"}]}
    assert drift.slim_result(created, {"src": "t.j2", "dest": "/etc/u"})["dest"] == "/etc/u"
    assert "dest" not in drift.slim_result(created, {"dest": "{{ where }}/u"})
    assert drift.slim_result({**created, "dest": "/etc/v"}, {"dest": "/etc/u"})["dest"] == "/etc/v"
    assert drift.describe_change("template", drift.slim_result(created, {"dest": "/etc/u"}))[0] == "/etc/u would be created"


# The verdicts a run publishes (set_stats) and the merge of several jobs' (a sliced AWX job).

@pytest.mark.parametrize("host, key", [
    ("gpu01", "blackwell_sglang_drift_gpu01"),
    ("gpu-01", "blackwell_sglang_drift_gpu_2d01"),
    ("gpu_01", "blackwell_sglang_drift_gpu_5f01"),
    ("10.0.0.5", "blackwell_sglang_drift_10_2e0_2e0_2e5"),
    ("nœud", "blackwell_sglang_drift_n__000153ud"),
])
def test_each_host_has_an_artifact_key_that_is_a_variable_name(host, key):
    assert drift.artifact_key(host) == key
    assert key.isidentifier()


def test_no_two_host_names_share_an_artifact_key():
    names = ["a-b", "a_b", "a_2db", "a.b", "a__b", "a_5fb", "ab", "a b", "aœb", "a__000153b"]
    assert len({drift.artifact_key(n) for n in names}) == len(names)


def test_the_published_verdicts_are_the_reports_hosts_with_name_and_check_mode():
    report = recorded("unreachable")
    published = drift.artifacts(report)
    assert sorted(published) == [drift.artifact_key("a"), drift.artifact_key("gone")]
    gone = published[drift.artifact_key("gone")]
    assert (gone["host"], gone["check_mode"], gone["status"]) == ("gone", True, "unreachable")
    assert {k: v for k, v in gone.items() if k not in ("host", "check_mode")} == report["hosts"]["gone"]


def _events_until_stats(name: str) -> list:
    with open(FIXTURES / f"{name}.events.jsonl", encoding="utf-8") as handle:
        events = [json.loads(line) for line in handle if line.strip()]
    return [e for e in events if e["event"] not in ("stats", "unstarted_play")]


@pytest.mark.parametrize("name", ["unreachable", "stopped-converge"])
def test_the_preview_before_the_recap_is_the_report_after_it(name):
    collector = drift.DriftCollector()
    for event in _events_until_stats(name):
        collector.handle(event)
    assert collector.preview()["hosts"] == recorded(name)["hosts"]
    # The preview leaves the run's own state as it was: the run then finishes as it would have.
    assert collector.stats is None


def test_a_failure_a_rescue_handled_is_not_a_failed_host_in_the_preview():
    collector = drift.DriftCollector()
    base = {"event": "result", "host": "h", "action": "ansible.builtin.command", "path": "site.yml:3"}
    collector.handle({"event": "playbook_start", "plays": 1, "check_mode": True})
    collector.handle({"event": "play_start", "play_id": "p1", "play": "one", "selected": ["h"], "batch": ["h"]})
    collector.handle({**base, "kind": "failed", "task": "Try", "res": {"msg": "no"}})
    assert collector.preview()["hosts"]["h"]["status"] == "failed"
    collector.handle({**base, "kind": "ok", "task": "Recover", "res": {"changed": False}})
    # Still in the run where the verdicts are published: a rescue handled the failure.
    host = collector.preview(alive={"h"})["hosts"]["h"]
    assert host["status"] == "not judged"
    assert host["failures"] == []
    assert [(f["label"], f["reason"]) for f in host["not_judged"]] == [("Try", "failed in check mode (rescued): no")]
    # Out of the run although it went on (an always section ran): failed, as the recap counts it.
    assert collector.preview(alive=set())["hosts"]["h"]["status"] == "failed"
    # Without the hosts still in the run, its last result decides.
    assert collector.preview()["hosts"]["h"]["status"] == "not judged"


def _job(report: dict) -> dict:
    return {"artifacts": drift.artifacts(report), "recap": None}


def test_the_merge_of_published_verdicts_is_the_report_of_their_hosts():
    report = recorded("stopped-converge")
    left = {"summary": report["summary"], "hosts": {h: report["hosts"][h] for h in "ab"}}
    right = {"summary": report["summary"], "hosts": {h: report["hosts"][h] for h in "cd"}}
    assert drift.merge({"job 1": _job(left), "job 2": _job(right)}) == report


def test_a_host_published_by_no_job_but_counted_in_its_recap_takes_the_verdict_told_from_its_results():
    told = {"status": "unreachable", "reason": "", "drift": [], "not_judged": [], "handlers_that_would_run": [],
            "failures": [{"task": "Read", "action": "stat", "reason": "refused", "path": "", "item": None, "label": "Read"}],
            "notes": {}}
    merged = drift.merge({"job": {"artifacts": {}, "recap": {"processed": {}, "failures": {}, "dark": {"x": 1}},
                                  "told": {"x": told}}})
    assert merged["hosts"] == {"x": told}
    assert merged["summary"]["exit_code"] == drift.EXIT_FAILED
    untold = drift.merge({"job": {"artifacts": {}, "recap": {"processed": {"y": 1}, "failures": {}, "dark": {}}}})
    assert (untold["hosts"]["y"]["status"], untold["hosts"]["y"]["reason"]) == (
        "not checked", "job published no verdict for it: the run ended before its last play")


def test_a_job_without_a_recap_leaves_the_merged_report_incomplete():
    report = recorded("unreachable")
    merged = drift.merge({"job 1": _job(report), "job 2": None})
    assert merged["summary"]["run_completed"] is False
    assert merged["summary"]["exit_code"] == drift.EXIT_FAILED
    assert drift.merge({})["summary"] == drift.incomplete_report()["summary"]
    # A job's artifacts with no verdict in them: its hosts are unknown, so the report is too.
    empty = drift.merge({"job 1": _job(report), "job 2": {"artifacts": {}, "recap": None}})
    assert (empty["summary"]["run_completed"], empty["summary"]["exit_code"]) == (False, drift.EXIT_FAILED)


def test_the_merge_refuses_a_check_and_a_run_that_was_not_one():
    report = recorded("unreachable")
    converge = {**report, "summary": {**report["summary"], "check_mode": False},
                "hosts": {"other": report["hosts"]["a"]}}
    with pytest.raises(drift.MergeError, match="^the jobs mix a check and a run that was not one"):
        drift.merge({"job 1": _job(report), "job 2": _job(converge)})


def _runner_event(counter, event, **data):
    return {"counter": counter, "event": event, "event_data": data}


def test_verdicts_told_from_runner_events_keep_drift_and_handlers_and_are_never_a_clean_bill():
    diff = {"before": "a\n", "after": "b\n", "before_header": "/etc/x", "after_header": "/etc/x"}
    events = [  # out of order, as an API may list them
        _runner_event(6, "playbook_on_stats", processed={"x": 1, "y": 1}, failures={}, dark={}),
        _runner_event(1, "playbook_on_play_start", play="one", play_uuid="u1"),
        _runner_event(2, "playbook_on_task_start", task="Write x"),
        _runner_event(3, "runner_on_ok", host="x", task="Write x", resolved_action="ansible.builtin.copy",
                      task_path="p.yml:3", res={"changed": True, "diff": [diff]}),
        _runner_event(4, "runner_on_ok", host="y", task="Write x", resolved_action="ansible.builtin.copy",
                      task_path="p.yml:3", res={"changed": False}),
        _runner_event(5, "playbook_on_handler_task_start", task="Restart"),
        _runner_event(5, "runner_on_ok", host="x", task="Restart", resolved_action="ansible.builtin.command",
                      task_path="p.yml:9", res={"changed": True}),
    ]
    merged = drift.merge({"job": drift.job_of_events(events)})["hosts"]
    assert merged["x"]["status"] == "drift"
    assert [(f["label"], f["reason"]) for f in merged["x"]["drift"]] == [("Write x", "content of /etc/x would change (+1 -1 lines)")]
    assert [f["label"] for f in merged["x"]["handlers_that_would_run"]] == ["Restart"]
    # y looked clean in its results, but they cannot show what check mode could not judge.
    assert (merged["y"]["status"], merged["y"]["reason"]) == (
        "not judged", "job published no verdict for it: the run ended before its last play")


def test_the_merge_refuses_a_host_two_jobs_name():
    report = recorded("unreachable")
    with pytest.raises(drift.MergeError, match=r"^host a is in job 1 and in job 2: the jobs are not slices of one run$"):
        drift.merge({"job 1": _job(report), "job 2": _job(report)})


def test_job_events_without_a_recap_are_a_job_that_did_not_complete():
    assert drift.job_of_events([{"event": "playbook_on_start", "event_data": {}}]) is None


def test_cli_names_a_merge_source_that_holds_no_job(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    (tmp_path / "other.json").write_text('{"name": "not a job"}', encoding="utf-8")
    (tmp_path / "page.json").write_text('{"count": 900, "next": "/api/v2/jobs/7/job_events/?page=2", "results": [{}]}',
                                        encoding="utf-8")
    for run in ("one", "two"):
        (tmp_path / "twice" / "artifacts" / run / "job_events").mkdir(parents=True)
    for source, why in ((tmp_path / "empty", "no ansible-runner job events under it"),
                        (tmp_path / "missing", "no such file or directory"),
                        (tmp_path / "other.json", "neither a job's events nor a job with its artifacts"),
                        (tmp_path / "page.json", "one page of a job's events (1 of 900); export them all, e.g. with"
                                                 " page_size above the count"),
                        (tmp_path / "twice", "holds 2 runs under artifacts/; name the artifact directory"
                                             " (artifacts/<ident>) of each run to merge")):
        with pytest.raises(SystemExit) as exc:
            drift_report.main(["--merge", str(source)])
        assert exc.value.code == drift.EXIT_USAGE
        assert f"drift-report: error: {source}: {why}\n" in capsys.readouterr().err


def test_cli_merges_without_running_anything_else(capsys):
    with pytest.raises(SystemExit) as exc:
        drift_report.main(["--merge", "a", "-i", "hosts", "-l", "x", "--save-events", "e.jsonl"])
    assert exc.value.code == drift.EXIT_USAGE
    assert "drift-report: error: --merge runs no playbook: -i, -l, --save-events cannot go with it\n" in capsys.readouterr().err


def test_the_merge_leaves_out_a_host_only_the_publishing_play_touched():
    events = [
        _runner_event(1, "playbook_on_play_start", play="one", play_uuid="u1"),
        _runner_event(2, "runner_on_failed", host="x", task="Check x", resolved_action="ansible.builtin.fail",
                      task_path="p.yml:3", res={"msg": "x is broken"}),
        _runner_event(3, "playbook_on_play_start", play=drift.PUBLISH_PLAY, play_uuid="u2"),
        _runner_event(4, "runner_on_ok", host="router", task="Publish each host's drift verdict",
                      resolved_action="ansible.builtin.set_stats", res={"changed": False}),
        _runner_event(5, "playbook_on_stats", processed={"x": 1, "router": 1}, failures={"x": 1}, dark={}),
    ]
    job = drift.job_of_events(events)
    assert job["recap"] == {"processed": {"x": 1}, "failures": {"x": 1}, "dark": {}}
    merged = drift.merge({"job": job})
    assert list(merged["hosts"]) == ["x"]
    assert [(f["label"], f["reason"]) for f in merged["hosts"]["x"]["failures"]] == [("Check x", "x is broken")]


def test_the_publishing_play_is_the_one_the_merge_and_the_callback_leave_out():
    play = yaml.safe_load((ROOT / "playbooks" / "publish.yml").read_text(encoding="utf-8"))[0]
    assert play["name"] == drift.PUBLISH_PLAY
    assert play["vars"] == {drift.PUBLISH_VAR: True}
