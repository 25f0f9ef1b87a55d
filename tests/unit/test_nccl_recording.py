"""The NCCL smoke test's report parser and the role's tasks, against a real recording.

tests/fixtures/nccl/ubuntu2404-h200x2/ was written by tests/fixtures/nccl/record-nccl-smoke.sh
on an Ubuntu 24.04 host with two H200s and torch 2.11.0+cu130 (its README says how): the
payload's own stdout, and three ansible-playbook runs of roles/sglang_service/tasks/nccl_smoke.yml
(pass, check mode, a timeout too short to finish) kept as ansible.posix.json reports.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils import nccl

HOST = Path(__file__).resolve().parent.parent / "fixtures" / "nccl" / "ubuntu2404-h200x2"
SIZES = [65536, 1048576, 16777216, 268435456]


def recorded_report():
    return nccl.parse_report((HOST / "direct.stdout").read_text())


def playbook(name):
    """(exit status, {task name without role prefix: localhost's result}) of a recorded run."""
    assert (HOST / "runs" / f"{name}.stderr").read_text() == ""
    report = json.loads((HOST / "runs" / f"{name}.json").read_text())
    tasks = {}
    for play in report["plays"]:
        for task in play["tasks"]:
            tasks[task["task"]["name"].split(" : ", 1)[-1]] = task["hosts"]["localhost"]
    return int((HOST / "runs" / f"{name}.rc").read_text()), tasks, report["stats"]["localhost"]


def test_recorded_report_parses_with_exact_sums_at_every_size():
    report = recorded_report()
    assert report["ok"] is True and report["error"] is None
    assert report["world_size"] == 2
    assert report["devices"] == ["NVIDIA H200", "NVIDIA H200"]
    assert (report["torch"], report["cuda"], report["nccl"]) == ("2.11.0+cu130", "13.0", "2.28.9")
    assert [entry["bytes"] for entry in report["results"]] == SIZES
    assert [entry["mismatches"] for entry in report["results"]] == [0, 0, 0, 0]
    # Multicast was off while it ran, and the report says so.
    assert report["environment"]["NCCL_NVLS_ENABLE"] == "0"
    assert report["environment"]["TORCH_SYMM_MEM_DISABLE_MULTICAST"] == "1"


def test_recorded_bandwidths_are_consistent_with_the_times():
    report = recorded_report()
    for entry in report["results"]:
        algbw = entry["bytes"] / (entry["time_us"] * 1e-6) / 1e9
        assert entry["algbw_gbps"] == pytest.approx(algbw, rel=1e-3)
        # busbw = algbw * 2(n-1)/n, which is algbw itself for two GPUs.
        assert entry["busbw_gbps"] == pytest.approx(entry["algbw_gbps"] * 2 * (2 - 1) / 2, abs=1e-3)
    # Larger messages amortise the latency: bandwidth grows with the size on this NVLink pair.
    busbw = [entry["busbw_gbps"] for entry in report["results"]]
    assert busbw == sorted(busbw)


def test_summary_of_the_recording_is_what_direct_json_recorded():
    summary = nccl.summarize(recorded_report())
    recorded = json.loads((HOST / "direct.json").read_text())
    assert recorded["rc"] == 0 and recorded["timed_out"] is False
    assert summary == recorded["parsed"]
    assert summary["busbw_bytes"] == 268435456
    assert summary["busbw_gbps"] == 297.2
    assert nccl.failure_message(recorded_report()) is None


def test_report_is_found_among_other_lines():
    stdout = (HOST / "direct.stdout").read_text()
    noisy = "NCCL INFO Bootstrap: Using eth0\n{not json\n" + stdout + "[rank0] done\n"
    assert nccl.parse_report(noisy) == recorded_report()


def test_wrong_sums_fail_with_the_sizes_named():
    report = recorded_report()
    report["results"][3]["mismatches"] = 5
    report["ok"] = False
    report["error"] = "wrong sums at 268435456 bytes"
    line = json.dumps(report)
    assert nccl.failure_message(nccl.parse_report(line)) == (
        "the NCCL all-reduce failed: wrong sums at 268435456 bytes"
    )


@pytest.mark.parametrize(
    "stdout, message",
    [
        ("", "the smoke test printed no report"),
        ('{"ok": true}\n', "the smoke test printed no report"),
        ('{"nccl_smoke": 2, "ok": true}\n', "report version 2, expected 1"),
        ('{"nccl_smoke": 1, "ok": true, "world_size": 2}\n', "the report has no results field of type list"),
        (
            '{"nccl_smoke": 1, "ok": true, "world_size": 2, "results": [{"bytes": 4}]}\n',
            "a result has no numeric time_us field",
        ),
    ],
)
def test_reports_that_are_not_the_payloads_are_refused(stdout, message):
    with pytest.raises(nccl.SmokeError) as error:
        nccl.parse_report(stdout)
    assert str(error.value) == message


def test_timeout_run_was_killed_without_a_report():
    recorded = json.loads((HOST / "timeout.json").read_text())
    assert recorded == {
        "parse_error": "the smoke test printed no report",
        "rc": -9,
        "seconds": recorded["seconds"],
        "timed_out": True,
    }
    assert 6 <= recorded["seconds"] < 8
    assert (HOST / "after-timeout.txt").read_text() == "no payload process left\n"


def test_role_tasks_pass_and_keep_the_bus_bandwidth_as_a_fact():
    rc, tasks, stats = playbook("pass")
    assert rc == 0
    assert stats["failures"] == 0 and stats["changed"] == 0
    smoke = tasks["Run the NCCL all-reduce smoke test with the venv's torch"]
    assert smoke["passed"] is True and smoke["timed_out"] is False
    assert smoke["report"] == nccl.parse_report(json.dumps(smoke["report"]))
    assert smoke["msg"] == "2 GPUs, busbw %s GB/s at 268435456 bytes" % smoke["summary"]["busbw_gbps"]
    assert tasks["Report why the NCCL smoke test did not run"]["skipped"] is True
    assert tasks["Fail the host when its GPUs cannot all-reduce"]["skipped"] is True
    fact = tasks["Keep the measured bus bandwidth as a fact"]["ansible_facts"]["sglang_service_nccl_smoke_report"]
    assert fact == dict(smoke["summary"], ran=True, passed=True, msg=smoke["msg"])
    assert fact["world_size"] == 2
    assert set(fact["by_size"]) == {str(size) for size in SIZES}


def test_role_tasks_skip_the_test_in_check_mode_with_a_message():
    rc, tasks, stats = playbook("check")
    assert rc == 0 and stats["failures"] == 0
    assert tasks["Run the NCCL all-reduce smoke test with the venv's torch"]["skipped"] is True
    assert tasks["Report why the NCCL smoke test did not run"]["msg"] == (
        "NCCL smoke test skipped: check mode (sglang_service_nccl_smoke_check_mode is false)"
    )
    assert tasks["Keep the measured bus bandwidth as a fact"]["skipped"] is True


def test_role_tasks_fail_the_host_on_a_hang_naming_causes_and_facts():
    rc, tasks, stats = playbook("forced-timeout")
    assert rc == 2 and stats["failures"] == 1
    smoke = tasks["Run the NCCL all-reduce smoke test with the venv's torch"]
    assert smoke["timed_out"] is True and smoke["passed"] is False
    assert 6 <= smoke["seconds"] < 8
    assert tasks["Fail the host when its GPUs cannot all-reduce"]["msg"] == (
        "the NCCL all-reduce did not finish within 6 s and was killed (a hang). Likely causes: "
        + nccl.LIKELY_CAUSES
        + '. gpu_facts on this node: topology.p2p "ok", iommu "off". '
        "sglang was not restarted."
    )
    # The facts named are the ones gpu_facts read on this host in the same run.
    gpu = tasks["Read the GPUs"]["ansible_facts"]["gpu"]
    assert (gpu["topology"]["p2p"], gpu["iommu"]) == ("ok", "off")


def test_query_full_is_the_same_answer_as_the_gpu_recording_keeps():
    here = (HOST / "query-full.csv").read_text()
    gpu_copy = HOST.parent.parent / "gpu" / "ubuntu2404-h200x2" / "raw" / "query-full.csv"
    assert gpu_copy.read_text() == here
    lines = here.splitlines()
    assert lines[-1] == "exit status: 0"
    assert [line.split(", ")[1] for line in lines[:-1]] == ["NVIDIA H200", "NVIDIA H200"]
