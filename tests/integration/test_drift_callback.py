"""The drift_report callback and tools/drift-report on real check-mode runs.

tests/fixtures/drift/check.yml runs in check mode on hosts over the local connection (and one
`gone` host, ssh to a closed loopback port): an any_errors_fatal preflight, then a serial
converge with max_fail_percentage 0, a no_log task, a loop and a handler. Each case runs it
through ansible-playbook with the callback enabled and through tools/drift-report (which
drives ansible-runner), and asserts that both give the same JSON, Markdown and table, and the
exact verdicts. Check mode writes nothing: the target directory stays empty.
"""
from __future__ import annotations

import json
import os
import subprocess

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils import nccl
from conftest import ROOT, VENV_BIN, ansible_env, copy_as_collection

PLAYBOOK = ROOT / "tests" / "fixtures" / "drift" / "check.yml"
PREFLIGHT = "Check the hosts before anything changes"
CONVERGE = "Converge the hosts one at a time"
INTERPRETER = "ansible_python_interpreter=/usr/bin/python3"

# name -> (extra vars, limit, exit code, {host: (status, reason)})
CASES = {
    "stopped-converge": (
        {"drift_hosts": ["a", "b", "c"], "drift_converge_fail": "c"}, None, 2,
        {"a": ("drift", ""), "b": ("drift", ""), "c": ("failed", ""),
         "d": ("not checked", f"the run stopped after c failed 'gate : Stop where asked' in play "
                              f"'{CONVERGE}' (max_fail_percentage: 0)")}),
    "stopped-preflight": (
        {"drift_hosts": ["a", "b", "c"], "drift_preflight_fail": "b"}, None, 2,
        {h: ("not checked", f"the run stopped after b failed 'Require the host to be ready' "
                            f"in play '{PREFLIGHT}' (any_errors_fatal)") for h in "acd"}
        | {"b": ("failed", "")}),
    "limited-drift": (
        {"drift_hosts": ["a"]}, "a,b", 1, {"a": ("drift", ""), "b": ("ok", "")}),
    "clean": ({}, None, 0, {h: ("ok", "") for h in "abcd"}),
    "not-judged": (
        {"drift_unjudged": ["b"]}, "a,b", 2,
        {"a": ("ok", ""), "b": ("not judged", "check mode could not judge 1 decision(s), the first "
                                "'Ask the service whether it is up': runs only outside check mode "
                                "(when: not ansible_check_mode)")}),
    "unreachable": (
        {"drift_hosts": ["a"], "drift_fatal": False}, "a,gone", 2,
        {"a": ("drift", ""), "gone": ("unreachable", "")}),
}


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    path = tmp_path_factory.mktemp("drift-callback")
    (path / "files").mkdir()
    (path / "hosts.ini").write_text(
        "[all]\na ansible_connection=local\nb ansible_connection=local\n"
        "c ansible_connection=local\nd ansible_connection=local\n"
        # Nothing listens on port 1 of loopback: the connection is refused at once.
        "gone ansible_host=127.0.0.1 ansible_port=1 ansible_connection=ssh\n")
    return path


def variables(work, extra: dict) -> str:
    return json.dumps({"drift_dir": str(work / "files"), **extra})


def limit_args(limit: str | None) -> list:
    # Without a limit, the unreachable host stays out of the cases that are not about it.
    return ["--limit", limit or "a,b,c,d"]


def run_playbook(work, name: str, extra: dict, limit: str | None, *args: str,
                 **env) -> tuple[dict, str, str]:
    out = work / f"{name}-playbook"
    out.mkdir(exist_ok=True)
    proc = subprocess.run(
        ["ansible-playbook", "-i", str(work / "hosts.ini"), str(PLAYBOOK), "--check", "--diff",
         *limit_args(limit), "-e", INTERPRETER, "-e", variables(work, extra), *args],
        cwd=work, capture_output=True, text=True, check=False,
        env=ansible_env(ANSIBLE_CALLBACKS_ENABLED="blackwell.sglang.drift_report",
                        BLACKWELL_DRIFT_REPORT_JSON=str(out / "r.json"),
                        BLACKWELL_DRIFT_REPORT_MARKDOWN=str(out / "r.md"), **env))
    assert (out / "r.json").exists(), proc.stdout + proc.stderr
    return json.loads((out / "r.json").read_text()), (out / "r.md").read_text(), proc.stdout


def run_cli(work, name: str, extra: dict, limit: str | None, tool=ROOT / "tools" / "drift-report",
            env=None) -> tuple[int, dict, str, str]:
    out = work / f"{name}-cli"
    out.mkdir(exist_ok=True)
    proc = subprocess.run(
        [str(tool), "-i", str(work / "hosts.ini"), "-p", str(PLAYBOOK), *limit_args(limit),
         "-e", INTERPRETER, "-e", variables(work, extra),
         "--json", str(out / "r.json"), "--markdown", str(out / "r.md")],
        cwd=work, capture_output=True, text=True, check=False, env=env or ansible_env())
    assert (out / "r.json").exists(), proc.stdout + proc.stderr
    return (proc.returncode, json.loads((out / "r.json").read_text()), (out / "r.md").read_text(),
            proc.stdout)


@pytest.mark.parametrize("name", list(CASES))
def test_callback_and_cli_give_the_same_exact_verdicts(work, name):
    extra, limit, exit_code, verdicts = CASES[name]
    report, markdown, output = run_playbook(work, name, extra, limit)
    code, cli_report, cli_markdown, cli_output = run_cli(work, name, extra, limit)
    assert cli_report == report
    assert cli_markdown == markdown
    # The callback prints the same table at the end of the playbook's own output.
    assert cli_output.strip() in output
    assert code == exit_code, cli_output
    assert report["summary"]["exit_code"] == exit_code
    assert {h: (v["status"], v["reason"]) for h, v in report["hosts"].items()} == verdicts
    assert list((work / "files").iterdir()) == []


def test_drift_is_kept_after_a_failure_and_no_log_drift_needs_no_printed_result(work):
    extra, limit, _code, _verdicts = CASES["stopped-converge"]
    # With -v and the YAML result format, results are printed as YAML, not the JSON that
    # printed-text parsing expected; the callback takes results as data: the same report.
    report, _markdown, output = run_playbook(work, "yaml", extra, limit, "-v",
                                             ANSIBLE_CALLBACK_RESULT_FORMAT="yaml")
    assert "censored: 'the output has been hidden" in output, output
    default, _markdown, _output = run_playbook(work, "stopped-converge", extra, limit)
    assert report == default
    files = work / "files"
    assert [(f["label"], f["reason"]) for f in report["hosts"]["c"]["drift"]] == [
        ("Write the service configuration", f"{files}/c.conf would be created"),
        ("Write the secrets file", "would change (no_log: the task's details are hidden)"),
        ("Make the data directories [cache]", f"{files}/c-cache would be created (directory)"),
        ("Make the data directories [models]", f"{files}/c-models would be created (directory)"),
    ]
    assert report["summary"]["drifted_hosts"] == 3
    assert report["summary"]["drifted_tasks"] == 12


def test_cli_runs_from_an_installed_collection_without_a_virtualenv(work, tmp_path):
    dest = copy_as_collection(tmp_path)
    assert not (dest / ".venv").exists()
    env = ansible_env(BLACKWELL_VENV=str(tmp_path / "no-venv"))
    # The collection resolves from where it is installed, not from this checkout.
    env.pop("ANSIBLE_COLLECTIONS_PATH")
    env["PATH"] = os.pathsep.join([str(VENV_BIN), "/usr/bin", "/bin"])
    extra, limit, exit_code, verdicts = CASES["limited-drift"]
    code, report, _markdown, output = run_cli(work, "installed", extra, limit,
                                              tool=dest / "tools" / "drift-report", env=env)
    assert code == exit_code, output
    assert {h: (v["status"], v["reason"]) for h, v in report["hosts"].items()} == verdicts


def test_ansible_doc_renders_the_callback():
    proc = subprocess.run(
        [str(VENV_BIN / "ansible-doc"), "-t", "callback", "blackwell.sglang.drift_report"],
        capture_output=True, text=True, check=False, env=ansible_env())
    assert proc.returncode == 0, proc.stderr
    for text in ("json_path", "BLACKWELL_DRIFT_REPORT_JSON", "[callback_drift_report]",
                 "markdown_path", "events_path", "print_table"):
        assert text in proc.stdout, text


def test_notes_of_each_host_come_from_the_notes_fact_in_its_results(work):
    """The report takes each host's notes from the fact blackwell_sglang_notes in the run's
    results, topic by topic, the last value standing (the NCCL smoke test's line as the role and
    sglang_service_info set it, from the module_utils function both use), the same through the
    callback and the CLI; a host with notes only is ok, and one whose test measured nothing has
    no note."""
    measured = {
        "a": {"ran": True, "passed": True, "msg": "2 GPUs all-reduced", "world_size": 2,
              "busbw_gbps": 297.2, "by_size": {"268435456": 297.2}},
        "b": {"ran": True, "passed": False, "world_size": 8, "busbw_gbps": None,
              "msg": "the NCCL all-reduce did not finish within 60 s and was killed (a hang). Likely causes: the IOMMU"},
        # The lab's venvs hold no torch: nothing measured, nothing to note.
        "c": {"ran": False, "passed": None, "msg": "cannot import torch"},
    }
    lines = {name: nccl.note(report) for name, report in measured.items()}
    assert lines == {"a": "passed: 297.2 GB/s bus bandwidth over 2 GPUs",
                     "b": "FAILED: the NCCL all-reduce did not finish within 60 s and was killed (a hang)",
                     "c": None}
    playbook = work / "notes.yml"
    playbook.write_text(
        "- name: Read the nodes\n  hosts: all\n  gather_facts: false\n  tasks:\n"
        "    - name: Note a finding that a later task replaces\n      ansible.builtin.set_fact:\n"
        "        blackwell_sglang_notes: {nccl_smoke: stale, pcie: [\"GPU0: persistence mode is off\"]}\n"
        "      when: inventory_hostname == 'a'\n"
        "    - name: Note the NCCL smoke test\n      ansible.builtin.set_fact:\n"
        "        blackwell_sglang_notes: {nccl_smoke: \"{{ lines[inventory_hostname] | default(none) }}\"}\n")
    extra = ["-e", INTERPRETER, "-e", json.dumps({"lines": lines}), "--limit", "a,b,c,d"]
    out = work / "notes-out"
    out.mkdir()
    proc = subprocess.run(
        ["ansible-playbook", "-i", str(work / "hosts.ini"), str(playbook), "--check", "--diff", *extra],
        cwd=work, capture_output=True, text=True, check=False,
        env=ansible_env(ANSIBLE_CALLBACKS_ENABLED="blackwell.sglang.drift_report",
                        BLACKWELL_DRIFT_REPORT_JSON=str(out / "p.json"),
                        BLACKWELL_DRIFT_REPORT_MARKDOWN=str(out / "p.md")))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    cli = subprocess.run(
        [str(ROOT / "tools" / "drift-report"), "-i", str(work / "hosts.ini"), "-p", str(playbook), *extra,
         "--json", str(out / "c.json"), "--markdown", str(out / "c.md")],
        cwd=work, capture_output=True, text=True, check=False, env=ansible_env())
    report, markdown = json.loads((out / "p.json").read_text()), (out / "p.md").read_text()
    assert (cli.returncode, json.loads((out / "c.json").read_text()), (out / "c.md").read_text()) == (0, report, markdown)
    assert cli.stdout.strip() in proc.stdout
    assert {h: (v["status"], v["notes"]) for h, v in report["hosts"].items()} == {
        "a": ("ok", {"nccl_smoke": [lines["a"]], "pcie": ["GPU0: persistence mode is off"]}),
        "b": ("ok", {"nccl_smoke": [lines["b"]]}),
        "c": ("ok", {}),
        "d": ("ok", {}),
    }
    assert (f"| a | nccl_smoke | {lines['a']} |\n| a | pcie | GPU0: persistence mode is off |\n"
            f"| b | nccl_smoke | {lines['b']} |\n") in markdown
    assert f"a     nccl_smoke  {lines['a']}" in cli.stdout
