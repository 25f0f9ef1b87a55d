"""sglang_service's smoke-test tasks judging the NCCL version the test reports, on localhost.

No multi-GPU NCCL can run here, so the release's interpreter is a stand-in (a script, named as
such) that prints what the real payload printed on a host with two H200s
(tests/fixtures/nccl/ubuntu2404-h200x2/direct.stdout: torch 2.11.0+cu130 with NCCL 2.28.9): the
module reads it through the same interface, the payload's standard output. The GPU facts the
role is given say which compute capability the node has. NCCL before 2.31.2 on compute capability
12 is the finding (NVIDIA/nccl#2418), under sglang_service_nccl_version_policy.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils import nccl
from conftest import ROOT, local_play_tasks

RECORDED = ROOT / "tests" / "fixtures" / "nccl" / "ubuntu2404-h200x2" / "direct.stdout"
FINDING = ("NCCL 2.28.9, which the release's torch loads, is older than 2.31.2, and NCCL before 2.31.2 fails "
           "collectives of 512 KiB and more on compute capability 12 GPUs with an illegal memory access "
           "(NVIDIA/nccl#2418); torch pins its nvidia-nccl-cu13 exactly, so the remedy is NCCL 2.31.2 or newer in the "
           "release: sglang_install's NCCL floor (sglang_install_nccl_floor_policy) lifts that pin with the uv installer, "
           "and an install without dependencies (sglang_install_no_deps) lists nvidia-nccl-cu13>=2.31.2 in "
           "sglang_install_extra_packages or the lock")
WARN_TASK = "Warn about an NCCL that fails large collectives on these GPUs"
FAIL_TASK = "Refuse an NCCL that fails large collectives on these GPUs"
KEEP_TASK = "Keep the measured bus bandwidth as a fact"


def test_the_recorded_nccl_is_a_finding_on_compute_capability_12_only():
    version = nccl.parse_report(RECORDED.read_text())["nccl"]
    assert version == "2.28.9"
    assert nccl.version_finding(version, [12]) == FINDING
    assert nccl.version_finding(version, ["12", 9]) == FINDING
    assert nccl.version_finding(version, [9]) is None
    assert nccl.version_finding(version, []) is None
    for fixed in ("2.31.2", "2.32.3", "3.0"):
        assert nccl.version_finding(fixed, [12]) is None, fixed
    # torch 2.14.1's pin, and the 2.31 releases before the fix.
    for broken in ("2.30.7", "2.31.0", "2.31.1"):
        assert nccl.version_finding(broken, [12]).startswith(f"NCCL {broken}, which the release's torch loads, is older"), broken
    assert nccl.version_finding(None, [12]) is None


def smoke_tasks(tmp_path: Path, majors: list, *args: str, expect_rc: int = 0) -> dict:
    """Run tasks/nccl_smoke.yml with the stand-in interpreter; {task name: result}."""
    venv = tmp_path / "release"
    (venv / "bin").mkdir(parents=True, exist_ok=True)
    standin = venv / "bin" / "python"
    standin.write_text(f"#!/bin/sh\n# Stand-in for a GPU node's NCCL run: the real payload's recorded output.\n"
                       f"cat {RECORDED}\n")
    standin.chmod(0o755)
    play = [{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"name": "Run the smoke test tasks of sglang_service", "ansible.builtin.include_role": {
            "name": "blackwell.sglang.sglang_service", "tasks_from": "nccl_smoke"}}]}]
    extra = {"sglang_service_venv": str(venv), "sglang_service_env_file": str(tmp_path / "etc" / "sglang.env"),
             "sglang_service_gpu": {"present": True, "count": 2, "capability_majors": majors},
             # No systemd here to start the sandbox's transient unit: the stand-in runs directly.
             # The lab runs the test in it (molecule/sglang_service: a release's code never as root).
             "__sglang_service_nccl_smoke_sandbox": None}
    (tmp_path / "etc").mkdir(exist_ok=True)
    tasks = local_play_tasks(tmp_path, play, "-e", json.dumps(extra), *args, expect_rc=expect_rc)
    return {name.split(" : ", 1)[-1]: result for name, result in tasks}


def test_an_old_nccl_on_compute_capability_12_is_warned_about_and_noted(tmp_path):
    tasks = smoke_tasks(tmp_path, [12])
    assert tasks["Run the NCCL all-reduce smoke test with the venv's torch"]["nccl_finding"] == FINDING
    assert tasks[WARN_TASK]["msg"] == f"WARNING: sglang_service: {FINDING}"
    assert tasks[FAIL_TASK]["skipped"] is True
    notes = tasks[KEEP_TASK]["ansible_facts"]["blackwell_sglang_notes"]
    assert notes == {"nccl_smoke": "passed: 297.2 GB/s bus bandwidth over 2 GPUs", "nccl_version": FINDING}
    assert json.loads((tmp_path / "etc" / "nccl-smoke.json").read_text())["nccl"] == "2.28.9"


def test_the_fail_policy_stops_the_host_with_the_remedy(tmp_path):
    tasks = smoke_tasks(tmp_path, [12], "-e", "sglang_service_nccl_version_policy=fail", expect_rc=2)
    assert tasks[FAIL_TASK]["failed"] is True
    assert tasks[FAIL_TASK]["msg"] == (
        f"sglang_service: {FINDING} (sglang_service_nccl_version_policy: fail). sglang was not restarted.")
    assert tasks[WARN_TASK]["skipped"] is True
    assert tasks[KEEP_TASK]["ansible_facts"]["blackwell_sglang_notes"]["nccl_version"] == FINDING


@pytest.mark.parametrize(("majors", "policy"), [([9], "warn"), ([12], "ignore")])
def test_other_gpus_or_the_ignore_policy_say_nothing(tmp_path, majors, policy):
    tasks = smoke_tasks(tmp_path, majors, "-e", f"sglang_preflight_pcie_policy={policy}")
    assert tasks[WARN_TASK]["skipped"] is True and tasks[FAIL_TASK]["skipped"] is True
    assert tasks[KEEP_TASK]["ansible_facts"]["blackwell_sglang_notes"]["nccl_version"] is None
