"""The gpu_facts parsing core against nvidia-smi answers: generated boxes and a real H200 recording.

`gather` is fed the same callables the module gives it (run a command, read a file), here
answering from text instead of processes, so every case runs the full path from nvidia-smi's
output to the fact.
"""
from __future__ import annotations

import json
import re

import pytest

import gpu_samples as samples
from ansible_collections.blackwell.sglang.plugins.module_utils import gpu

PROC = "/proc/driver/nvidia/version"
SMI = "/usr/bin/nvidia-smi"
H200 = samples.FIXTURES / "h200"


class FakeNode:
    """Answers gather's commands from a dict {argv tuple: (rc, stdout, stderr)}; records calls."""

    def __init__(self, answers, files=None):
        self.answers = answers
        self.files = files or {}
        self.calls = []

    def run(self, argv):
        self.calls.append(tuple(argv))
        if tuple(argv) not in self.answers:
            raise AssertionError("unexpected command %r" % (argv,))
        return self.answers[tuple(argv)]

    def read(self, path):
        return self.files.get(path)


def smi_answers(answers):
    """Recording layout {file: (rc, stdout)} -> FakeNode answers keyed by the full argv."""
    return {
        tuple([SMI] + samples.RECORDED_COMMANDS[name]): (rc, text, "")
        for name, (rc, text) in answers.items()
    }


def facts_for(box, proc=True, **extra):
    node = FakeNode(
        smi_answers(samples.box_answers(box)),
        {PROC: samples.proc_version(box.driver, box.open_module)} if proc else {},
    )
    return gpu.gather(node.run, node.read, SMI, PROC, **extra), node


def adhoc_json(path):
    """The JSON object of an `ansible localhost -m ...` answer ("localhost | SUCCESS => {...}")."""
    text = path.read_text()
    head, sep, body = text.partition(" => ")
    assert sep and head == "localhost | SUCCESS", text[:200]
    return json.loads(body)


# ---- generated boxes ------------------------------------------------------------------------

def test_rtx_pro_6000_x8_over_pcie():
    facts, node = facts_for(samples.rtx_pro_6000_x8())
    assert facts["present"] is True
    assert facts["reason"] is None
    assert facts["count"] == 8
    assert facts["capability_majors"] == [12]
    assert [g["compute_capability"] for g in facts["gpus"]] == ["12.0"] * 8
    assert facts["gpus"][0] == {
        "index": 0,
        "name": "NVIDIA RTX PRO 6000 Blackwell Server Edition",
        "uuid": "GPU-5f3c1c40-8a0b-4f6e-9d57-0c1e2a3b4c50",
        "compute_capability": "12.0",
        "major": 12,
        "minor": 0,
        "memory_total_mib": 97887,
        "pci_bus_id": "00000000:17:00.0",
        "pcie_link_gen_current": 5,
        "pcie_link_gen_max": 5,
        "pcie_link_width_current": 16,
        "pcie_link_width_max": 16,
        "persistence_mode": True,
    }
    assert facts["gpus"][7]["pci_bus_id"] == "00000000:E3:00.0"
    assert facts["driver_version"] == "580.95.05"
    assert facts["cuda_driver_version"] == "13.0"
    assert facts["kernel_module_open"] is True
    assert facts["kernel_module_source"] == "proc"
    assert facts["driver_mismatch"] is False
    pairs = facts["topology"]["pairs"]
    assert len(pairs) == 28
    assert {p["type"] for p in pairs} == {"pcie"}
    ok = {"p2p_read": "OK", "p2p_write": "OK"}
    assert pairs[0] == dict(ok, gpu_a=0, gpu_b=1, link="PIX", type="pcie")
    assert dict(ok, gpu_a=0, gpu_b=2, link="NODE", type="pcie") in pairs
    assert dict(ok, gpu_a=3, gpu_b=4, link="SYS", type="pcie") in pairs
    assert facts["topology"]["summary"] == "pcie_only"
    assert facts["topology"]["p2p"] == "ok"
    # No kernel command line or IOMMU directory was given to read.
    assert facts["iommu"] is None
    # topo is asked because there is more than one GPU; nothing else is run.
    assert node.calls == [
        (SMI,) + tuple(samples.QUERY_ARGV),
        (SMI,),
        (SMI, "topo", "-m"),
        (SMI, "topo", "-p2p", "r"),
        (SMI, "topo", "-p2p", "w"),
    ]


def test_h100_nvswitch_box_is_nvlink_all_and_nic_columns_are_ignored():
    facts, dummy = facts_for(samples.h100_sxm_x8())
    assert facts["count"] == 8
    assert facts["capability_majors"] == [9]
    assert facts["gpus"][3]["name"] == "NVIDIA H100 80GB HBM3"
    assert facts["gpus"][3]["memory_total_mib"] == 81559
    assert facts["kernel_module_open"] is False
    pairs = facts["topology"]["pairs"]
    assert len(pairs) == 28
    assert all(p["link"] == "NV18" and p["type"] == "nvlink" for p in pairs)
    assert max(p["gpu_b"] for p in pairs) == 7
    assert facts["topology"]["summary"] == "nvlink_all"


def test_mixed_box_mixes_capabilities_and_links():
    facts, dummy = facts_for(samples.mixed_box())
    assert facts["capability_majors"] == [9, 12]
    assert [(g["major"], g["minor"]) for g in facts["gpus"]] == [(9, 0), (9, 0), (12, 0), (12, 0)]
    ok = {"p2p_read": "OK", "p2p_write": "OK"}
    assert facts["topology"]["pairs"] == [
        dict(ok, gpu_a=0, gpu_b=1, link="NV12", type="nvlink"),
        dict(ok, gpu_a=0, gpu_b=2, link="SYS", type="pcie"),
        dict(ok, gpu_a=0, gpu_b=3, link="SYS", type="pcie"),
        dict(ok, gpu_a=1, gpu_b=2, link="SYS", type="pcie"),
        dict(ok, gpu_a=1, gpu_b=3, link="SYS", type="pcie"),
        dict(ok, gpu_a=2, gpu_b=3, link="PHB", type="pcie"),
    ]
    assert facts["topology"]["summary"] == "mixed"


def test_driver_below_cuda13_floor_is_reported_as_is():
    facts, node = facts_for(samples.below_cuda13_floor())
    assert facts["present"] is True
    assert facts["driver_version"] == "570.172.08"
    assert facts["cuda_driver_version"] == "12.8"
    assert facts["kernel_module_open"] is True
    # The facts carry what a floor check needs; the floor itself (580.65.06) is role policy.
    assert tuple(int(p) for p in facts["driver_version"].split(".")) < (580, 65, 6)
    assert facts["topology"] == {"pairs": [], "summary": "single", "p2p": None}
    assert (SMI, "topo", "-m") not in node.calls
    assert (SMI, "topo", "-p2p", "r") not in node.calls


def test_no_nvidia_smi_is_an_answer():
    node = FakeNode({})
    facts = gpu.gather(node.run, node.read, None, PROC)
    assert facts == gpu.empty_facts("nvidia-smi was not found")
    assert node.calls == []


def test_driver_not_loaded_is_an_answer():
    node = FakeNode(smi_answers(samples.failing_answers(9, samples.NO_DRIVER)))
    facts = gpu.gather(node.run, node.read, SMI, PROC)
    assert facts["present"] is False
    assert facts["reason"] == (
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
        "Make sure that the latest NVIDIA driver is installed and running."
    )
    assert facts["count"] == 0 and facts["gpus"] == []
    assert facts["driver_mismatch"] is False
    assert facts["nvidia_smi"] == SMI


def test_no_devices_is_an_answer():
    node = FakeNode(smi_answers(samples.failing_answers(6, samples.NO_DEVICES)),
                    {PROC: samples.proc_version("580.95.05", True)})
    facts = gpu.gather(node.run, node.read, SMI, PROC)
    assert facts["present"] is False
    assert facts["reason"] == "No devices were found"
    assert facts["driver_version"] == "580.95.05"
    assert facts["kernel_module_open"] is True


def test_driver_library_mismatch_is_a_fact_not_a_failure():
    node = FakeNode(smi_answers(samples.failing_answers(18, samples.mismatch_answer("580.105"))),
                    {PROC: samples.proc_version("580.95.05", True)})
    facts = gpu.gather(node.run, node.read, SMI, PROC)
    assert facts["present"] is False
    assert facts["driver_mismatch"] is True
    assert facts["nvml_library_version"] == "580.105"
    assert facts["driver_version"] == "580.95.05"
    assert facts["kernel_module_open"] is True
    assert facts["reason"] == (
        "Failed to initialize NVML: Driver/library version mismatch: the loaded kernel module "
        "(580.95.05) is not the installed NVML library (580.105); reload the nvidia modules or reboot"
    )
    assert facts["count"] == 0 and facts["gpus"] == [] and facts["capability_majors"] == []
    # Only the query was run: the same failure would answer every other command.
    assert node.calls == [(SMI,) + tuple(samples.QUERY_ARGV)]


def test_other_nvidia_smi_failure_keeps_its_message():
    node = FakeNode({(SMI,) + tuple(samples.QUERY_ARGV): (2, "", 'Field "compute_cap" is not a valid field to query.\n')})
    facts = gpu.gather(node.run, node.read, SMI, PROC)
    assert facts["present"] is False
    assert facts["reason"] == 'nvidia-smi exited with 2: Field "compute_cap" is not a valid field to query.'


def test_modinfo_answers_when_the_module_is_not_loaded():
    box = samples.below_cuda13_floor()
    answers = smi_answers(samples.failing_answers(9, samples.NO_DRIVER))
    answers[("/sbin/modinfo", "-F", "license", "nvidia")] = (0, "Dual MIT/GPL\n", "")
    node = FakeNode(answers)
    facts = gpu.gather(node.run, node.read, SMI, PROC, modinfo="/sbin/modinfo")
    assert box.open_module is True
    assert facts["kernel_module_open"] is True
    assert facts["kernel_module_source"] == "modinfo"


def test_topology_unreadable_gives_summary_none():
    box = samples.h100_sxm_x8()
    answers = smi_answers(samples.box_answers(box))
    answers[(SMI, "topo", "-m")] = (255, "", "Failed to run topology\n")
    node = FakeNode(answers)
    facts = gpu.gather(node.run, node.read, SMI, PROC)
    assert facts["present"] is True
    # The peer-to-peer matrices still answer for every pair.
    assert facts["topology"] == {"pairs": [], "summary": "none", "p2p": "ok"}


# ---- the parsers one by one -----------------------------------------------------------------

def test_query_name_with_comma_and_unknown_values():
    gpus, driver = gpu.parse_query_gpu(
        "1, Example, Model X, GPU-1, [N/A], [N/A], 00000000:02:00.0, 580.95.05, [N/A], [N/A], [N/A], [N/A], [N/A]\n"
        "0, NVIDIA H200, GPU-0, 9.0, 143771, 00000000:01:00.0, 580.95.05, 1, 5, 8, 16, Disabled\n"
    )
    assert driver == "580.95.05"
    assert [g["index"] for g in gpus] == [0, 1]
    assert gpus[1]["name"] == "Example, Model X"
    assert gpus[1]["compute_capability"] is None and gpus[1]["major"] is None
    assert gpus[1]["memory_total_mib"] is None
    assert [gpus[1][key] for key in ("pcie_link_gen_current", "pcie_link_gen_max", "pcie_link_width_current",
                                     "pcie_link_width_max", "persistence_mode")] == [None] * 5
    assert [gpus[0][key] for key in ("pcie_link_gen_current", "pcie_link_gen_max", "pcie_link_width_current",
                                     "pcie_link_width_max", "persistence_mode")] == [1, 5, 8, 16, False]


def test_query_of_the_older_field_list_is_refused_with_the_line():
    """Seven fields are the answer to the older --query-gpu list: too few for the current one."""
    line = "0, NVIDIA H200, GPU-0, 9.0, 143771, 00000000:01:00.0, 580.95.05"
    with pytest.raises(ValueError, match=re.escape("unexpected nvidia-smi query line: %r" % line)):
        gpu.parse_query_gpu(line + "\n")


def test_query_garbage_raises_with_the_line():
    with pytest.raises(ValueError, match=re.escape("unexpected nvidia-smi query line: 'garbage'")):
        gpu.parse_query_gpu("garbage\n")


@pytest.mark.parametrize(
    "text, expected",
    [
        ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build  (x@y)  Thu\n",
         ("580.95.05", True)),
        ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.133.20  Fri Mar 14 00:00:00 UTC 2025\n",
         ("570.133.20", False)),
        ("NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  580.82.07  Release Build\n",
         ("580.82.07", True)),
        ("something else\n", (None, None)),
    ],
)
def test_proc_version(text, expected):
    assert gpu.parse_proc_version(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Dual MIT/GPL\n", True),
        ("NVIDIA\n", False),
        ("filename:       /lib/modules/6.1.0/updates/dkms/nvidia.ko\nlicense:        Dual MIT/GPL\n", True),
        ("filename:       /lib/modules/6.1.0/kernel/nvidia.ko\nlicense:        NVIDIA\n", False),
        ("", None),
    ],
)
def test_modinfo_license(text, expected):
    assert gpu.parse_modinfo_license(text) is expected


def test_cuda_version_from_both_layouts():
    assert gpu.parse_cuda_version((H200 / "nvidia-smi.txt").read_text()) == "13.0"
    assert gpu.parse_cuda_version((H200 / "nvidia-smi-q.txt").read_text()) == "13.0"
    assert gpu.parse_cuda_version("no version here") is None


def test_unknown_link_code_is_typed_unknown():
    text = "\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tC2C\t0-71\nGPU1\tC2C\t X \t0-71\n"
    pairs = gpu.parse_topology(text)
    assert pairs == [{"gpu_a": 0, "gpu_b": 1, "link": "C2C", "type": "unknown"}]
    assert gpu.topology_summary(2, pairs) == "mixed"


# ---- the real H200 recording ----------------------------------------------------------------

def test_recorded_h200_answers_parse():
    """nvidia-smi's own answers from a one-GPU H200 host, through the core."""
    commands = json.loads((H200 / "commands.json").read_text())
    answers = {
        tuple([SMI] + argv): (0, (H200 / name).read_text(), "") for name, argv in commands.items()
    }
    node = FakeNode(answers, {PROC: (H200 / "proc_version.txt").read_text()})
    facts = gpu.gather(node.run, node.read, SMI, PROC)
    assert facts["present"] is True
    assert facts["count"] == 1
    only = facts["gpus"][0]
    assert only["name"] == "NVIDIA H200"
    assert only["compute_capability"] == "9.0"
    assert (only["major"], only["minor"]) == (9, 0)
    assert only["memory_total_mib"] == 143771
    assert facts["capability_majors"] == [9]
    assert tuple(int(p) for p in facts["driver_version"].split(".")) >= (580,)
    assert facts["driver_version"] == "580.159.04"
    assert facts["cuda_driver_version"] == "13.0"
    assert facts["kernel_module_open"] is True
    assert facts["topology"] == {"pairs": [], "summary": "single", "p2p": None}
    assert (only["pcie_link_gen_current"], only["pcie_link_width_current"], only["persistence_mode"]) == (5, 16, True)
    # The single-GPU matrix parses to no pair, its affinity columns ignored.
    assert gpu.parse_topology((H200 / "topo.txt").read_text()) == []
    assert gpu.parse_p2p((H200 / "topo-p2p-r.txt").read_text()) == {}


def test_recorded_h200_module_answer():
    """What `ansible localhost -c local -m blackwell.sglang.gpu_facts` printed on that host."""
    for name in ("gpu_facts.adhoc.txt", "gpu_facts_check.adhoc.txt"):
        result = adhoc_json(H200 / name)
        assert result["changed"] is False
        facts = result["ansible_facts"]["gpu"]
        assert facts["present"] is True
        assert facts["count"] == 1
        assert facts["gpus"][0]["compute_capability"] == "9.0"
        assert facts["capability_majors"] == [9]
        assert int(facts["driver_version"].split(".")[0]) >= 580
        assert facts["kernel_module_open"] is True
        assert facts["topology"]["summary"] == "single"


def test_recorded_h200_module_answer_matches_the_core():
    """The module on the GPU host and the core on its recorded answers agree field for field."""
    commands = json.loads((H200 / "commands.json").read_text())
    answers = {
        tuple(["/usr/bin/nvidia-smi"] + argv): (0, (H200 / name).read_text(), "")
        for name, argv in commands.items()
    }
    node = FakeNode(answers, {PROC: (H200 / "proc_version.txt").read_text()})
    facts = gpu.gather(node.run, node.read, "/usr/bin/nvidia-smi", PROC)
    recorded = adhoc_json(H200 / "gpu_facts.adhoc.txt")["ansible_facts"]["gpu"]
    # Recorded before the PCIe and IOMMU facts: those are compared in tests/unit/test_gpu_pcie.py.
    assert "iommu" not in recorded
    assert samples.recorded_part(facts, recorded) == recorded


def test_committed_recordings_match_their_generator(tmp_path):
    """Recordings kept for container labs are exactly what gpu_samples writes (regenerate with
    `python tests/gpu_samples.py`)."""
    samples.write_committed(tmp_path)
    for name in samples.COMMITTED:
        fresh = {p.name: p.read_text() for p in (tmp_path / name).iterdir()}
        kept = {p.name: p.read_text() for p in (samples.FIXTURES / name).iterdir()}
        assert kept == fresh, name
