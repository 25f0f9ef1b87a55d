"""blackwell.sglang.gpu_facts run through `ansible localhost`, asking the stand-in nvidia-smi.

The stand-in replays recorded answers (tests/fixtures/gpu/stand-in/nvidia-smi), so these runs
cover the module's own part: option handling, finding the executable, running commands, the
returned facts, check mode and the failure for a bad path. The last part runs
playbooks/preflight.yml on this machine against generated boxes, for sglang_preflight_pcie_policy.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess

import gpu_samples as samples
from ansible_collections.blackwell.sglang.plugins.module_utils import gpu
from ansible_collections.blackwell.sglang.plugins.plugin_utils import drift
from conftest import VENV_BIN, ansible_env

H200 = samples.FIXTURES / "h200"
H200X2 = samples.FIXTURES / "h200x2"


def recording_args(recording, stand_in, iommu):
    """Module arguments that read everything from a recording, this machine's own files not at all."""
    return "nvidia_smi=%s proc_driver_version_path=%s proc_cmdline_path=%s sys_class_iommu_path=%s" % (
        stand_in, recording / "proc_version.txt", recording / samples.CMDLINE_FILE, iommu)


def gpu_facts(args="", check=False, **env):
    """Run the module once; returns (rc, parsed result)."""
    argv = [
        str(VENV_BIN / "ansible"), "localhost", "-c", "local",
        "-e", "ansible_python_interpreter=" + str(VENV_BIN / "python"),
        "-m", "blackwell.sglang.gpu_facts",
    ]
    if args:
        argv += ["-a", args]
    if check:
        argv.append("--check")
    proc = subprocess.run(argv, env=ansible_env(**env), capture_output=True, text=True, check=False)
    # The minimal output: "localhost | STATUS => {json}"
    start = proc.stdout.find("localhost | ")
    head, sep, body = proc.stdout[start:].partition(" => ")
    assert start >= 0 and sep, proc.stdout + proc.stderr
    return proc.returncode, json.loads(body)


def test_replayed_h200_gives_what_the_real_host_gave(tmp_path):
    recording = tmp_path / "h200"
    shutil.copytree(H200, recording)
    stand_in = recording / "nvidia-smi"
    shutil.copy2(samples.STAND_IN, stand_in)
    rc, result = gpu_facts("nvidia_smi=%s proc_driver_version_path=%s" % (stand_in, recording / "proc_version.txt"))
    assert rc == 0, result
    assert result["changed"] is False
    facts = result["ansible_facts"]["gpu"]
    recorded = json.loads((H200 / "gpu_facts.adhoc.txt").read_text().partition(" => ")[2])
    expected = dict(recorded["ansible_facts"]["gpu"], nvidia_smi=str(stand_in))
    # Recorded before the PCIe and IOMMU facts: compared on the keys the recording holds.
    assert samples.recorded_part(facts, expected) == expected
    assert facts["gpus"][0]["persistence_mode"] is True


def test_replayed_h200x2_gives_what_the_real_host_gave(tmp_path):
    """The recording made by this module on a 2x H200 host, replayed here: the same facts."""
    recording = tmp_path / "h200x2"
    shutil.copytree(H200X2, recording)
    stand_in = recording / "nvidia-smi"
    shutil.copy2(samples.STAND_IN, stand_in)
    iommu = samples.iommu_dir(recording, tmp_path / "iommu")
    rc, result = gpu_facts(recording_args(recording, stand_in, iommu))
    assert rc == 0, result
    recorded = json.loads((H200X2 / "gpu_facts.adhoc.txt").read_text().partition(" => ")[2])
    assert result["ansible_facts"]["gpu"] == dict(recorded["ansible_facts"]["gpu"], nvidia_smi=str(stand_in))
    assert result["ansible_facts"]["gpu"]["topology"]["p2p"] == "ok"
    assert result["ansible_facts"]["gpu"]["iommu"] == "off"


def test_field_report_box_reads_its_command_line_and_iommu_units(tmp_path):
    recording = tmp_path / "box"
    shutil.copytree(samples.FIXTURES / "rtx-pro-6000-x8", recording)
    stand_in = recording / "nvidia-smi"
    shutil.copy2(samples.STAND_IN, stand_in)
    iommu = samples.iommu_dir(recording, tmp_path / "iommu")
    assert sorted(p.name for p in iommu.iterdir()) == ["dmar0", "dmar1", "dmar2", "dmar3"]
    rc, result = gpu_facts(recording_args(recording, stand_in, iommu), check=True)
    assert rc == 0, result
    facts = result["ansible_facts"]["gpu"]
    assert facts["iommu"] == "passthrough"
    assert facts["topology"]["p2p"] == "ok"
    assert {(p["p2p_read"], p["p2p_write"]) for p in facts["topology"]["pairs"]} == {("OK", "OK")}
    assert {(g["pcie_link_gen_current"], g["pcie_link_width_current"], g["persistence_mode"])
            for g in facts["gpus"]} == {(5, 16, True)}
    # Without IOMMU units the same command line is off; without either file, unknown.
    empty = tmp_path / "no-units"
    empty.mkdir()
    rc, result = gpu_facts(recording_args(recording, stand_in, empty))
    assert result["ansible_facts"]["gpu"]["iommu"] == "off"
    rc, result = gpu_facts("nvidia_smi=%s proc_cmdline_path=%s sys_class_iommu_path=%s" % (
        stand_in, tmp_path / "absent", tmp_path / "absent"))
    assert rc == 0, result
    assert result["ansible_facts"]["gpu"]["iommu"] is None


def test_pcie_blackwell_box_in_check_mode(tmp_path):
    box = samples.rtx_pro_6000_x8()
    stand_in = samples.write_recording(
        tmp_path / "box", samples.box_answers(box), samples.proc_version(box.driver, box.open_module))
    before = sorted((p.name, p.stat().st_mtime_ns) for p in (tmp_path / "box").iterdir())
    args = "nvidia_smi=%s proc_driver_version_path=%s" % (stand_in, tmp_path / "box" / "proc_version.txt")
    rc, result = gpu_facts(args, check=True)
    assert rc == 0, result
    assert result["changed"] is False
    facts = result["ansible_facts"]["gpu"]
    assert facts["count"] == 8
    assert facts["capability_majors"] == [12]
    assert facts["driver_version"] == "580.95.05"
    assert facts["cuda_driver_version"] == "13.0"
    assert facts["kernel_module_open"] is True
    assert facts["topology"]["summary"] == "pcie_only"
    assert before == sorted((p.name, p.stat().st_mtime_ns) for p in (tmp_path / "box").iterdir())
    # The same answer outside check mode: reading changes nothing, so both modes agree.
    assert gpu_facts(args)[1] == result


def test_driver_library_mismatch_is_not_a_failure(tmp_path):
    stand_in = samples.write_recording(
        tmp_path / "box", samples.failing_answers(18, samples.mismatch_answer("580.105")),
        samples.proc_version("580.95.05", True))
    rc, result = gpu_facts("nvidia_smi=%s proc_driver_version_path=%s" % (stand_in, tmp_path / "box" / "proc_version.txt"))
    assert rc == 0, result
    facts = result["ansible_facts"]["gpu"]
    assert facts["present"] is False
    assert facts["driver_mismatch"] is True
    assert facts["driver_version"] == "580.95.05"
    assert facts["reason"].startswith("Failed to initialize NVML: Driver/library version mismatch")


def test_no_nvidia_smi_on_path(tmp_path):
    # This machine has no NVIDIA driver; the /proc paths given do not exist either.
    rc, result = gpu_facts("proc_driver_version_path=%s proc_cmdline_path=%s sys_class_iommu_path=%s" % (
        tmp_path / "absent", tmp_path / "absent", tmp_path / "absent"))
    assert rc == 0, result
    assert result["ansible_facts"]["gpu"] == {
        "present": False,
        "reason": "nvidia-smi was not found",
        "count": 0,
        "gpus": [],
        "driver_version": None,
        "cuda_driver_version": None,
        "kernel_module_open": None,
        "kernel_module_source": None,
        "driver_mismatch": False,
        "nvml_library_version": None,
        "capability_majors": [],
        "topology": {"pairs": [], "summary": "none", "p2p": None},
        "iommu": None,
        "nvidia_smi": None,
    }


def test_bad_nvidia_smi_path_fails_with_its_name(tmp_path):
    missing = tmp_path / "no-such-nvidia-smi"
    rc, result = gpu_facts("nvidia_smi=%s" % missing)
    assert rc == 2
    assert result["msg"] == "nvidia_smi: %s is not an executable file" % missing
    not_executable = tmp_path / "plain-file"
    not_executable.write_text("")
    rc, result = gpu_facts("nvidia_smi=%s" % not_executable)
    assert rc == 2
    assert result["msg"] == "nvidia_smi: %s is not an executable file" % not_executable


def test_stand_in_refuses_what_was_not_recorded(tmp_path):
    stand_in = samples.write_recording(tmp_path / "box", samples.box_answers(samples.mixed_box()))
    proc = subprocess.run([str(stand_in), "-x"], capture_output=True, text=True, check=False)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr == "stand-in nvidia-smi: no recorded answer for ['-x'] in %s\n" % (tmp_path / "box")


def test_record_script_round_trips_a_recording(tmp_path, repo_root):
    """tools/lab/record-gpu-host.sh, run against the stand-in replaying a box, records that box."""
    box = samples.rtx_pro_6000_x8()
    answers = samples.box_answers(box)
    stand_in = samples.write_recording(tmp_path / "box", answers)
    out = tmp_path / "recorded"
    env = ansible_env(PATH="%s:%s:/usr/bin:/bin" % (stand_in.parent, VENV_BIN))
    proc = subprocess.run(
        [str(repo_root / "tools" / "lab" / "record-gpu-host.sh"), str(out)],
        env=env, capture_output=True, text=True, check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for name, (dummy, text) in answers.items():
        assert (out / name).read_text() == text, name
        assert not (out / (name + ".rc")).exists(), name
    # The box has no `-q` answer recorded: the stand-in's refusal is kept, status and all.
    assert (out / "nvidia-smi-q.txt.rc").read_text() == "2\n"
    assert json.loads((out / "commands.json").read_text()) == {
        "nvidia-smi-q.txt": ["-q"], "nvidia-smi.txt": [], "query.csv": samples.QUERY_ARGV, "topo.txt": ["topo", "-m"],
        "topo-p2p-r.txt": ["topo", "-p2p", "r"], "topo-p2p-w.txt": ["topo", "-p2p", "w"],
    }
    # This machine's own kernel command line and IOMMU units, in the recording's layout.
    assert (out / samples.CMDLINE_FILE).read_text() == open("/proc/cmdline").read()
    assert (out / samples.IOMMU_FILE).read_text().split() == sorted(os.listdir("/sys/class/iommu"))
    for name in ("gpu_facts.adhoc.txt", "gpu_facts_check.adhoc.txt"):
        result = json.loads((out / name).read_text().partition(" => ")[2])
        facts = result["ansible_facts"]["gpu"]
        assert result["changed"] is False
        assert facts["nvidia_smi"] == str(stand_in)
        assert facts["count"] == 8
        assert facts["topology"]["summary"] == "pcie_only"
        assert facts["topology"]["p2p"] == "ok"
    assert "nvidia-smi on PATH: %s\n" % stand_in in (out / "host.txt").read_text()


# ---- playbooks/preflight.yml: sglang_preflight_pcie_policy ----------------------------------

PCIE_TASK_WARN = "Warn about PCIe links, peer-to-peer, persistence and the IOMMU"
PCIE_TASK_FAIL = "Refuse a node that is not ready for the rollout"


def troubled_node(tmp_path):
    """The field report's box with every fault, as extra vars for the preflight on localhost."""
    box = samples.rtx_pro_6000_x8_troubled()
    recording = tmp_path / "troubled"
    stand_in = samples.write_recording(recording, samples.box_answers(box),
                                       samples.proc_version(box.driver, box.open_module), box=box)
    iommu = samples.iommu_dir(recording, tmp_path / "iommu")
    return box, {"sglang_preflight_nvidia_smi": str(stand_in),
                 "sglang_preflight_proc_cmdline_path": str(recording / samples.CMDLINE_FILE),
                 "sglang_preflight_sys_class_iommu_path": str(iommu)}


def preflight(tmp_path, extra_vars, check=False, **env):
    """Run playbooks/preflight.yml on localhost; (rc, {task name: result}, json report)."""
    (tmp_path / "vars.json").write_text(json.dumps(dict(extra_vars, ansible_python_interpreter="/usr/bin/python3")))
    argv = [str(VENV_BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local",
            "-e", "@%s" % (tmp_path / "vars.json"), "playbooks/preflight.yml"]
    if check:
        argv.append("--check")
    proc = subprocess.run(argv, env=ansible_env(ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", **env),
                          capture_output=True, text=True, check=False, cwd=samples.FIXTURES.parents[2])
    # The JSON report comes first; the drift report, where enabled, prints its text after it.
    report, dummy = json.JSONDecoder().raw_decode(proc.stdout)
    tasks = {task["task"]["name"]: task["hosts"]["localhost"] for play in report["plays"] for task in play["tasks"]}
    return proc.returncode, tasks, report


def test_preflight_warns_per_finding_and_the_drift_report_notes_them(tmp_path):
    box, extra = troubled_node(tmp_path)
    events = tmp_path / "events.jsonl"
    rc, tasks, report = preflight(tmp_path, extra, check=True,
                                  ANSIBLE_CALLBACKS_ENABLED="blackwell.sglang.drift_report",
                                  BLACKWELL_DRIFT_REPORT_EVENTS=str(events))
    assert rc == 0, report
    facts = tasks["Read the node's GPUs, driver and topology"]["ansible_facts"]["gpu"]
    expected = ["hardware: " + f["message"] for f in gpu.pcie_findings(facts)]
    assert [f["check"] for f in gpu.pcie_findings(facts)] == ["p2p", "link", "persistence", "iommu"]
    warn = tasks[PCIE_TASK_WARN]
    assert warn["ansible_facts"]["blackwell_sglang_notes"] == {"pcie": [f["message"] for f in gpu.pcie_findings(facts)]}
    assert [w if isinstance(w, str) else w["msg"] for w in warn["warnings"]] == expected
    assert tasks[PCIE_TASK_FAIL]["skipped"] is True
    assert report["stats"]["localhost"]["changed"] == 0
    # The drift report, from the same run: four PCIe notes, nothing not judged, no drift.
    verdict = drift.replay(json.loads(line) for line in events.read_text().splitlines())
    host = verdict["hosts"]["localhost"]
    assert host["status"] == "ok" and host["drift"] == [] and host["not_judged"] == []
    assert host["notes"] == {"pcie": [f["message"] for f in gpu.pcie_findings(facts)]}
    assert verdict["summary"]["exit_code"] == 0


def test_preflight_fail_policy_stops_with_every_finding(tmp_path):
    box, extra = troubled_node(tmp_path)
    rc, tasks, report = preflight(tmp_path, dict(extra, sglang_preflight_pcie_policy="fail", sglang_service_tp_size=4))
    assert rc == 2
    failed = tasks[PCIE_TASK_FAIL]
    assert failed["failed"] is True
    # TP 4 spans GPU0-GPU3, where only the IOMMU is at fault.
    assert failed["msg"] == (
        "preflight: localhost is not ready for tensor parallelism over PCIe (sglang_preflight_pcie_policy: fail): "
        "GPU0 to GPU3: the IOMMU translates device traffic (not passthrough) and the GPUs talk over PCIe only, "
        "so peer-to-peer traffic of tensor parallelism (TP 4: GPU0 to GPU3) is redirected through the root "
        "complex: NCCL hangs or falls back to system memory. Fix: add iommu=pt to the kernel command line "
        "(with intel_iommu=on or amd_iommu=on where the IOMMU is needed) and reboot, or turn the IOMMU and "
        "PCIe ACS off in the BIOS. Nothing has been changed on any node."
    )
    # The host stopped there: no warning after the refusal.
    assert PCIE_TASK_WARN not in tasks


def test_preflight_ignore_policy_and_a_clean_box_say_nothing(tmp_path):
    box, extra = troubled_node(tmp_path)
    rc, tasks, report = preflight(tmp_path, dict(extra, sglang_preflight_pcie_policy="ignore"))
    assert rc == 0, report
    assert tasks[PCIE_TASK_WARN]["skipped"] is True and tasks[PCIE_TASK_FAIL]["skipped"] is True
    assert "warnings" not in tasks[PCIE_TASK_WARN]
    # The healthy box under fail: nothing found, nothing fails.
    clean = samples.rtx_pro_6000_x8()
    recording = tmp_path / "clean"
    stand_in = samples.write_recording(recording, samples.box_answers(clean),
                                       samples.proc_version(clean.driver, clean.open_module), box=clean)
    rc, tasks, report = preflight(tmp_path, dict(extra, sglang_preflight_nvidia_smi=str(stand_in),
                                                 sglang_preflight_sys_class_iommu_path=str(samples.iommu_dir(
                                                     recording, tmp_path / "clean-iommu")),
                                                 sglang_preflight_proc_cmdline_path=str(recording / samples.CMDLINE_FILE),
                                                 sglang_preflight_pcie_policy="fail"))
    assert rc == 0, report
    assert tasks[PCIE_TASK_FAIL]["skipped"] is True
    assert tasks[PCIE_TASK_WARN]["skipped"] is True


def test_preflight_refuses_an_unknown_policy_and_says_nothing_of_pcie(tmp_path):
    box, extra = troubled_node(tmp_path)
    rc, tasks, report = preflight(tmp_path, dict(extra, sglang_preflight_pcie_policy="loud"))
    assert rc == 2
    # The troubled box's PCIe findings are not judged under a policy that means nothing.
    assert tasks[PCIE_TASK_FAIL]["msg"] == (
        "preflight: sglang_preflight_pcie_policy must be warn, fail or ignore, got 'loud'. "
        "Nothing has been changed on any node.")
    assert PCIE_TASK_WARN not in tasks
    assert report["stats"]["localhost"]["changed"] == 0


# ---- playbooks/preflight.yml: one node refused, in a converge and in a check -----------------------

STOP_TASK = "Stop a converge when a node failed the preflight"


def preflight_of_two(tmp_path, check, bad=True, extra_vars=None):
    """playbooks/preflight.yml on two local hosts, `good` and `bad` (where BAD, a PCIe policy it
    does not know); (rc, {task name: {host: result}})."""
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(json.dumps({"all": {
        "vars": {"ansible_connection": "local", "ansible_python_interpreter": "/usr/bin/python3",
                 "sglang_preflight_require_gpu": False, "sglang_preflight_nvidia_smi": "/usr/bin/false"},
        "hosts": {"bad": {"sglang_preflight_pcie_policy": "sometimes"} if bad else {}, "good": {}}}}), encoding="utf-8")
    (tmp_path / "extra.json").write_text(json.dumps(extra_vars or {}), encoding="utf-8")
    argv = [str(VENV_BIN / "ansible-playbook"), "-i", str(inventory), "-e", f"@{tmp_path / 'extra.json'}",
            "playbooks/preflight.yml"] + (["--check"] if check else [])
    proc = subprocess.run(argv, env=ansible_env(ANSIBLE_STDOUT_CALLBACK="ansible.posix.json"),
                          capture_output=True, text=True, check=False, cwd=samples.FIXTURES.parents[2])
    report, dummy = json.JSONDecoder().raw_decode(proc.stdout)
    return proc.returncode, {task["task"]["name"]: task["hosts"] for play in report["plays"] for task in play["tasks"]}


def test_a_node_refused_by_the_preflight_stops_every_node_of_a_converge(tmp_path):
    rc, tasks = preflight_of_two(tmp_path, check=False)
    assert rc == 2
    assert tasks[PCIE_TASK_FAIL]["bad"]["failed"] is True
    assert tasks[PCIE_TASK_FAIL]["good"].get("skipped") is True
    assert list(tasks[STOP_TASK]) == ["good"]
    assert tasks[STOP_TASK]["good"]["failed"] is True
    assert tasks[STOP_TASK]["good"]["msg"] == ("preflight: bad failed the preflight or could not be reached; the rollout"
                                               " stops before any node changes. Nothing has been changed on any node.")


def test_a_node_refused_by_the_preflight_of_a_check_stops_no_other(tmp_path):
    rc, tasks = preflight_of_two(tmp_path, check=True)
    assert rc == 2
    assert tasks[PCIE_TASK_FAIL]["bad"]["failed"] is True
    assert tasks[STOP_TASK]["good"]["skipped"] is True
    assert tasks[STOP_TASK]["good"]["false_condition"] == "not ansible_check_mode"


# AWX's meta variables of one slice of a sliced job template (docs/awx.md).
AWX_SLICE = {"awx_job_launch_type": "workflow", "awx_workflow_job_name": "SGLang rollout",
             "awx_job_template_name": "SGLang rollout"}


def test_a_sliced_converge_is_refused_before_any_node_is_read_unless_the_site_allows_it(tmp_path):
    rc, tasks = preflight_of_two(tmp_path, check=False, bad=False, extra_vars=AWX_SLICE)
    assert rc == 2
    refusal = tasks["Refuse a sliced converge before any node changes"]
    assert list(refusal) == ["bad"]  # run once, for the play
    assert refusal["bad"]["msg"].startswith("preflight: this converge is one slice of a sliced AWX job:")
    assert "Read the node's GPUs, driver and topology" not in tasks
    # Allowed, with the count stated: the nodes are checked, and the rollout goes on.
    allowed = dict(AWX_SLICE, sglang_rollout_allow_sliced=True, sglang_rollout_slice_count=2, sglang_rollout_serial=4)
    rc, tasks = preflight_of_two(tmp_path, check=False, bad=False, extra_vars=allowed)
    assert rc == 0
    assert tasks["Refuse a sliced converge before any node changes"]["bad"]["skipped"] is True
    assert sorted(tasks["Read the node's GPUs, driver and topology"]) == ["bad", "good"]
    assert all(not r.get("failed") for r in tasks["Read the node's GPUs, driver and topology"].values())
