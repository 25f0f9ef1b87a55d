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
from ansible_collections.blackwell.sglang.plugins.plugin_utils import drift
from conftest import ROOT, VENV_BIN, ansible_env, copy_as_collection

PLAYBOOK = ROOT / "tests" / "fixtures" / "drift" / "check.yml"
SLICED = PLAYBOOK.with_name("sliced.yml")
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


# A check of four hosts as one job and as the two slices AWX would run of it (its hosts by name,
# slice N of M taking every Mth from the Nth on): a drifts, b fails the preflight (not fatal, as
# site.yml's is not in a check), c passes a decision check mode cannot judge, d is unreachable.
SLICED_HOSTS = {
    "a": {"ansible_connection": "local"}, "b": {"ansible_connection": "local"},
    "c": {"ansible_connection": "local"},
    "d": {"ansible_connection": "ssh", "ansible_host": "127.0.0.1", "ansible_port": 1},
}
SLICED_VERDICTS = {"a": "drift", "b": "failed", "c": "not judged", "d": "unreachable"}


def _runner_job(work, name: str, hosts: list) -> tuple:
    """An ansible-runner private data directory checking HOSTS with sliced.yml, and its process."""
    private = work / "jobs" / name
    (private / "inventory").mkdir(parents=True)
    (private / "env").mkdir()
    inventory = {"all": {"hosts": {h: SLICED_HOSTS[h] for h in hosts},
                         "vars": {"ansible_python_interpreter": "/usr/bin/python3"}}}
    (private / "inventory" / "hosts.json").write_text(json.dumps(inventory), encoding="utf-8")
    extra = {"drift_dir": str(work / "files"), "drift_hosts": ["a"], "drift_unjudged": ["c"],
             "drift_preflight_fail": "b", "drift_fatal": False}
    (private / "env" / "extravars").write_text(json.dumps(extra), encoding="utf-8")
    env = ansible_env(ANSIBLE_CALLBACKS_ENABLED="blackwell.sglang.drift_report",
                      BLACKWELL_DRIFT_REPORT_JSON=str(private / "report.json"),
                      BLACKWELL_DRIFT_REPORT_MARKDOWN=str(private / "report.md"))
    (private / "env" / "envvars").write_text(
        json.dumps({k: v for k, v in env.items() if k.startswith(("ANSIBLE_", "BLACKWELL_"))}), encoding="utf-8")
    proc = subprocess.Popen(  # pylint: disable=consider-using-with
        [str(VENV_BIN / "ansible-runner"), "run", str(private), "-p", str(SLICED), "--cmdline", "--check --diff"],
        env=ansible_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return private, proc


def _stats_event(private) -> dict:
    events = [json.loads(f.read_text(encoding="utf-8")) for f in private.glob("artifacts/*/job_events/*.json")]
    return next(e for e in events if e["event"] == "playbook_on_stats")["event_data"]


def _merge(tmp_path, *sources) -> tuple:
    """tools/drift-report --merge: its exit code, the report it wrote (None: none), its stderr."""
    out = tmp_path / "merged.json"
    out.unlink(missing_ok=True)
    proc = subprocess.run([str(ROOT / "tools" / "drift-report"), "--merge", *map(str, sources), "--json", str(out)],
                          capture_output=True, text=True, check=False, env=ansible_env())
    return proc.returncode, json.loads(out.read_text()) if out.exists() else None, proc.stderr


@pytest.fixture(scope="module")
def sliced_jobs(work):
    hosts = sorted(SLICED_HOSTS)
    jobs = {"one": _runner_job(work, "one", hosts)}
    for number in (1, 2):
        jobs[f"slice{number}"] = _runner_job(work, f"slice{number}", hosts[number - 1::2])
    # ansible-playbook's own exit codes: 4, a host was unreachable; 0, none failed.
    for name, (_private, proc) in jobs.items():
        output = proc.communicate(timeout=600)[0]
        assert (name, proc.returncode) == (name, {"one": 4, "slice1": 0, "slice2": 4}[name]), output[-5000:]
    return {name: private for name, (private, _proc) in jobs.items()}


def test_a_check_run_as_slices_merges_into_the_report_of_one_run(sliced_jobs, tmp_path):
    one = json.loads((sliced_jobs["one"] / "report.json").read_text(encoding="utf-8"))
    # The publishing play is not in the report: neither a host nor a play of its own.
    assert {h: v["status"] for h, v in one["hosts"].items()} == SLICED_VERDICTS
    # Each slice published the verdicts of its hosts, one key each; slice 2's hosts all failed,
    # so its run ended with them, before the publishing play: the merge tells theirs from the
    # job's own task results.
    published = _stats_event(sliced_jobs["slice1"])["artifact_data"]
    assert sorted(published) == [drift.artifact_key("a"), drift.artifact_key("c")]
    assert published[drift.artifact_key("c")]["host"] == "c"
    assert published[drift.artifact_key("c")]["check_mode"] is True
    assert published[drift.artifact_key("c")]["status"] == "not judged"
    assert _stats_event(sliced_jobs["slice2"])["artifact_data"] == {}

    out = tmp_path / "merged"
    proc = subprocess.run(
        [str(ROOT / "tools" / "drift-report"), "--merge", str(sliced_jobs["slice1"]), str(sliced_jobs["slice2"]),
         "--json", str(out.with_suffix(".json")), "--markdown", str(out.with_suffix(".md"))],
        capture_output=True, text=True, check=False, env=ansible_env())
    assert proc.returncode == one["summary"]["exit_code"] == 2, proc.stdout + proc.stderr
    assert json.loads(out.with_suffix(".json").read_text()) == one
    assert out.with_suffix(".md").read_text() == (sliced_jobs["one"] / "report.md").read_text()
    assert "4 host(s): 0 ok, 1 with drift" in proc.stdout


def test_the_merge_reads_awx_job_events_and_job_artifacts(sliced_jobs, tmp_path):
    one = json.loads((sliced_jobs["one"] / "report.json").read_text(encoding="utf-8"))

    def events(name):
        files = sorted(sliced_jobs[name].glob("artifacts/*/job_events/*.json"), key=lambda f: int(f.name.split("-")[0]))
        return [json.loads(f.read_text()) for f in files]

    # /api/v2/jobs/<id>/job_events/ as a page of results, and as a plain list of events.
    page = tmp_path / "slice1-events.json"
    page.write_text(json.dumps({"count": 0, "next": None, "results": events("slice1")}))
    plain = tmp_path / "slice2-events.json"
    plain.write_text(json.dumps(events("slice2")))
    code, merged, stderr = _merge(tmp_path, page, plain)
    assert code == 2, stderr
    assert merged == one
    # /api/v2/jobs/<id>/: the job's artifacts, which AWX took from the same recap event.
    job = tmp_path / "slice1-job.json"
    job.write_text(json.dumps({"id": 1043, "status": "successful",
                               "artifacts": _stats_event(sliced_jobs["slice1"])["artifact_data"]}))
    code, merged, stderr = _merge(tmp_path, job, sliced_jobs["slice2"])
    assert code == 2, stderr
    assert merged == one


def test_the_merge_refuses_a_host_in_two_jobs_and_names_both(sliced_jobs, tmp_path):
    code, merged, stderr = _merge(tmp_path, sliced_jobs["slice1"], sliced_jobs["one"])
    assert (code, merged) == (3, None)
    first = next(sliced_jobs["slice1"].glob("artifacts/*"))
    second = next(sliced_jobs["one"].glob("artifacts/*"))
    assert (f"drift-report: error: host a is in {first} and in {second}: "
            "the jobs are not slices of one run\n") in stderr, stderr
