"""blackwell.sglang.gpu_facts run through `ansible localhost`, asking the stand-in nvidia-smi.

The stand-in replays recorded answers (tests/fixtures/gpu/stand-in/nvidia-smi), so these runs
cover the module's own part: option handling, finding the executable, running commands, the
returned facts, check mode and the failure for a bad path.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess

import gpu_samples as samples
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
