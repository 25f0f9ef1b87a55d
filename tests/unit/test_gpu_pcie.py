"""PCIe links, persistence, peer-to-peer and the IOMMU in gpu_facts, and what the preflight finds
in them for tensor parallelism over PCIe.

Generated answers (tests/gpu_samples.py) stand for the boxes this machine does not have: the
field report's 8x RTX PRO 6000 as it should be, and the same box with every fault the preflight
looks for. Real answers come from H200 hosts: tests/fixtures/gpu/h200x2/ (recorded by the
current module, its output compared field for field), ubuntu2404-h200x2/gpu/ and h200/.
"""
from __future__ import annotations

import json

import pytest
from ansible.errors import AnsibleFilterError

import gpu_samples as samples
from ansible_collections.blackwell.sglang.plugins.filter import pcie_findings as pcie_filter
from ansible_collections.blackwell.sglang.plugins.module_utils import gpu

SMI = "/usr/bin/nvidia-smi"
PROC = "/proc/driver/nvidia/version"
CMDLINE = "/proc/cmdline"
IOMMU = "/sys/class/iommu"
PCIE_KEYS = ("pcie_link_gen_current", "pcie_link_gen_max", "pcie_link_width_current", "pcie_link_width_max",
             "persistence_mode")
# What nvidia-smi prints for arguments it does not know, as a driver without `topo -p2p` does.
REFUSED = "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n"


class Node:
    """Answers gather's commands from recording-layout answers and records the calls."""

    def __init__(self, answers, files=None, units=None):
        self.argv = {tuple([SMI] + samples.RECORDED_COMMANDS[name]): (rc, text, "")
                     for name, (rc, text) in answers.items()}
        self.files = files or {}
        self.units = units
        self.calls = []

    def run(self, argv):
        self.calls.append(tuple(argv))
        return self.argv[tuple(argv)]

    def list_dir(self, path):
        assert path == IOMMU
        return self.units


def gather_box(box, answers=None):
    node = Node(answers or samples.box_answers(box),
                {PROC: samples.proc_version(box.driver, box.open_module), CMDLINE: box.cmdline},
                list(box.iommu_units))
    facts = gpu.gather(node.run, node.files.get, SMI, PROC, proc_cmdline_path=CMDLINE,
                       sys_class_iommu_path=IOMMU, list_dir=node.list_dir)
    return facts, node


def gather_recording(path, smi=SMI):
    """The core on a recording's own answers, files and IOMMU listing."""
    commands = json.loads((path / "commands.json").read_text())
    answers = {tuple([smi] + argv): (0, (path / name).read_text(), "") for name, argv in commands.items()}
    files = {PROC: (path / "proc_version.txt").read_text(), CMDLINE: (path / samples.CMDLINE_FILE).read_text()}
    units = (path / samples.IOMMU_FILE).read_text().split()
    return gpu.gather(lambda argv: answers[tuple(argv)], files.get, smi, PROC, proc_cmdline_path=CMDLINE,
                      sys_class_iommu_path=IOMMU, list_dir=lambda dummy: units)


def adhoc_facts(path):
    head, sep, body = path.read_text().partition(" => ")
    assert sep and head == "localhost | SUCCESS", head
    result = json.loads(body)
    assert result["changed"] is False
    return result["ansible_facts"]["gpu"]


# ---- the field report's box, healthy and troubled -------------------------------------------

def test_field_report_box_has_full_links_peer_to_peer_and_passthrough():
    facts, node = gather_box(samples.rtx_pro_6000_x8())
    assert [[g[key] for key in PCIE_KEYS] for g in facts["gpus"]] == [[5, 5, 16, 16, True]] * 8
    assert {(p["p2p_read"], p["p2p_write"]) for p in facts["topology"]["pairs"]} == {("OK", "OK")}
    assert len(facts["topology"]["pairs"]) == 28
    assert facts["topology"]["p2p"] == "ok"
    assert facts["topology"]["summary"] == "pcie_only"
    # intel_iommu=on iommu=pt with DMAR units registered: the IOMMU is there and passes through.
    assert facts["iommu"] == "passthrough"
    assert gpu.pcie_findings(facts) == []
    assert gpu.pcie_findings(facts, 8) == []


def test_committed_field_report_recording_is_the_healthy_box():
    """The recording the lab replays gives the same facts as the generated box."""
    facts = gather_recording(samples.FIXTURES / "rtx-pro-6000-x8")
    expected, dummy = gather_box(samples.rtx_pro_6000_x8())
    assert facts == expected


TROUBLED_P2P = (
    "GPU0-GPU4, GPU0-GPU5, GPU0-GPU6, GPU0-GPU7, GPU1-GPU4, GPU1-GPU5, GPU1-GPU6, GPU1-GPU7, "
    "GPU2-GPU4, GPU2-GPU5, GPU2-GPU6, GPU2-GPU7, GPU3-GPU4, GPU3-GPU5, GPU3-GPU6, GPU3-GPU7 "
    "(read CNS, write CNS): no peer-to-peer between GPUs that tensor parallelism (TP 8: GPU0 to GPU7) "
    "spans, so NCCL copies through system memory or hangs. Likely cause: CNS, the chipset or root "
    "complex does not pass peer traffic (across CPU sockets, or PCIe ACS). Fix: disable PCIe ACS in "
    "the BIOS and set iommu=pt on the kernel command line, or keep TP to GPUs that reach each other."
)
TROUBLED_LINK = (
    "GPU5 (00000000:AB:00.0) Gen4 x8 of Gen5 x16: PCIe link below its maximum, and every all-reduce "
    "of tensor parallelism (TP 8: GPU0 to GPU7) waits for the slowest link. Likely cause: a card or "
    "riser not fully seated, a slot wired narrower, or the slot's speed capped in the BIOS; the "
    "generation also drops while a GPU idles, so confirm under load (nvidia-smi -q -d PCIE). Fix: "
    "reseat the card or riser, and set the slot's link speed to its maximum (or Auto) in the BIOS."
)
TROUBLED_PERSISTENCE = (
    "GPU6, GPU7: persistence mode is off, so the driver tears these GPUs down whenever no process "
    "holds them and initialises them again at every start of the server (slow starts and a longer "
    "NCCL set-up for tensor parallelism, TP 8: GPU0 to GPU7). Fix: run the nvidia-persistenced "
    "service (systemctl enable --now nvidia-persistenced), or nvidia-smi -pm 1 until the next reboot."
)


def iommu_message(last):
    return (
        "GPU0 to GPU%d: the IOMMU translates device traffic (not passthrough) and the GPUs talk over "
        "PCIe only, so peer-to-peer traffic of tensor parallelism (TP %d: GPU0 to GPU%d) is redirected "
        "through the root complex: NCCL hangs or falls back to system memory. Fix: add iommu=pt to "
        "the kernel command line (with intel_iommu=on or amd_iommu=on where the IOMMU is needed) and "
        "reboot, or turn the IOMMU and PCIe ACS off in the BIOS." % (last, last + 1, last)
    )


def test_troubled_box_facts():
    facts, dummy = gather_box(samples.rtx_pro_6000_x8_troubled())
    pairs = {(p["gpu_a"], p["gpu_b"]): (p["p2p_read"], p["p2p_write"]) for p in facts["topology"]["pairs"]}
    assert pairs[(0, 1)] == ("OK", "OK")
    assert pairs[(3, 4)] == ("CNS", "CNS")
    assert pairs[(4, 7)] == ("OK", "OK")
    assert facts["topology"]["p2p"] == "partial"
    assert [facts["gpus"][5][key] for key in PCIE_KEYS] == [4, 5, 8, 16, True]
    assert [g["persistence_mode"] for g in facts["gpus"]] == [True] * 6 + [False] * 2
    # intel_iommu=on without iommu=pt, and DMAR units registered: the IOMMU translates.
    assert facts["iommu"] == "on"


def test_troubled_box_gives_every_finding_with_gpus_cause_and_fix():
    facts, dummy = gather_box(samples.rtx_pro_6000_x8_troubled())
    assert gpu.pcie_findings(facts) == [
        {"check": "p2p", "gpus": [0, 1, 2, 3, 4, 5, 6, 7], "message": TROUBLED_P2P},
        {"check": "link", "gpus": [5], "message": TROUBLED_LINK},
        {"check": "persistence", "gpus": [6, 7], "message": TROUBLED_PERSISTENCE},
        {"check": "iommu", "gpus": [0, 1, 2, 3, 4, 5, 6, 7], "message": iommu_message(7)},
    ]
    # TP 8 set explicitly spans the same GPUs as the default (every GPU).
    assert gpu.pcie_findings(facts, 8) == gpu.pcie_findings(facts)


def test_tp_spans_the_lowest_indices_only():
    """TP 4 runs on GPU0-GPU3: one socket, peer-to-peer OK, full links, persistence on."""
    facts, dummy = gather_box(samples.rtx_pro_6000_x8_troubled())
    assert gpu.pcie_findings(facts, 4) == [{"check": "iommu", "gpus": [0, 1, 2, 3], "message": iommu_message(3)}]
    assert gpu.pcie_findings(facts, "4") == gpu.pcie_findings(facts, 4)


def test_each_finding_alone():
    box = samples.rtx_pro_6000_x8()
    box.gpus[2].link = (5, 5, 8, 16)
    facts, dummy = gather_box(box)
    assert [(f["check"], f["gpus"]) for f in gpu.pcie_findings(facts)] == [("link", [2])]
    assert gpu.pcie_findings(facts)[0]["message"].startswith(
        "GPU2 (00000000:3D:00.0) Gen5 x8 of Gen5 x16: PCIe link below its maximum")

    box = samples.rtx_pro_6000_x8()
    box.gpus[0].link = (1, 5, 16, 16)  # an idle GPU's power saving looks like this too
    facts, dummy = gather_box(box)
    assert [(f["check"], f["gpus"]) for f in gpu.pcie_findings(facts)] == [("link", [0])]

    box = samples.rtx_pro_6000_x8()
    box.gpus[3].persistence = False
    facts, dummy = gather_box(box)
    assert [(f["check"], f["gpus"]) for f in gpu.pcie_findings(facts)] == [("persistence", [3])]

    box = samples.rtx_pro_6000_x8()
    box.p2p_write[(1, 2)] = "TNS"  # one direction of one pair
    facts, dummy = gather_box(box)
    findings = gpu.pcie_findings(facts)
    assert [(f["check"], f["gpus"]) for f in findings] == [("p2p", [1, 2])]
    assert findings[0]["message"].startswith(
        "GPU1-GPU2 (read OK, write TNS): no peer-to-peer between GPUs that tensor parallelism "
        "(TP 8: GPU0 to GPU7) spans")
    assert "Likely cause: TNS, the PCIe path between them does not allow it" in findings[0]["message"]
    assert facts["topology"]["p2p"] == "partial"

    box = samples.rtx_pro_6000_x8()
    box.cmdline = "BOOT_IMAGE=/boot/vmlinuz root=/dev/sda1 ro amd_iommu=on"
    facts, dummy = gather_box(box)
    assert gpu.pcie_findings(facts) == [{"check": "iommu", "gpus": list(range(8)), "message": iommu_message(7)}]


def test_iommu_on_is_no_finding_over_nvlink():
    box = samples.h100_sxm_x8()
    box.cmdline = "ro intel_iommu=on"
    box.iommu_units = ("dmar0",)
    facts, dummy = gather_box(box)
    assert facts["iommu"] == "on"
    assert facts["topology"]["summary"] == "nvlink_all"
    assert gpu.pcie_findings(facts) == []


def test_no_findings_without_tensor_parallelism():
    facts, dummy = gather_box(samples.rtx_pro_6000_x8_troubled())
    assert gpu.pcie_findings(facts, 1) == []
    single, dummy = gather_box(samples.below_cuda13_floor())
    assert gpu.pcie_findings(single) == []
    assert gpu.pcie_findings(gpu.empty_facts("nvidia-smi was not found")) == []


def test_partial_and_none():
    box = samples.mixed_box()
    box.p2p_read = {(a, b): "NS" for a in range(4) for b in range(4) if a != b}
    box.p2p_write = dict(box.p2p_read)
    facts, dummy = gather_box(box)
    assert facts["topology"]["p2p"] == "none"
    assert {(p["p2p_read"], p["p2p_write"]) for p in facts["topology"]["pairs"]} == {("NS", "NS")}
    box.p2p_read[(0, 1)] = box.p2p_read[(1, 0)] = "OK"
    facts, dummy = gather_box(box)
    assert facts["topology"]["p2p"] == "partial"


def test_a_pair_is_ok_only_when_both_directions_are():
    box = samples.mixed_box()
    box.p2p_read[(3, 0)] = "CNS"  # the row of GPU3, the column of GPU0
    codes = gpu.parse_p2p(samples.p2p_matrix(box, box.p2p_read))
    assert codes[(0, 3)] == "CNS"
    assert codes[(0, 1)] == "OK"
    assert len(codes) == 6


def test_old_driver_without_topo_p2p_stays_a_normal_answer():
    box = samples.rtx_pro_6000_x8_troubled()
    answers = samples.box_answers(box)
    answers["topo-p2p-r.txt"] = answers["topo-p2p-w.txt"] = (2, REFUSED)
    for gpu_entry in box.gpus:
        gpu_entry.link = (None, None, None, None)
        gpu_entry.persistence = None
    answers["query.csv"] = (0, samples.query_csv(box))
    box.cmdline = "ro quiet"
    box.iommu_units = ()
    facts, node = gather_box(box, answers)
    assert facts["present"] is True and facts["reason"] is None
    assert facts["count"] == 8
    assert (SMI, "topo", "-p2p", "w") in node.calls
    assert {(p["p2p_read"], p["p2p_write"]) for p in facts["topology"]["pairs"]} == {(None, None)}
    assert facts["topology"]["p2p"] is None
    assert facts["topology"]["summary"] == "pcie_only"
    assert [[g[key] for key in PCIE_KEYS] for g in facts["gpus"]] == [[None] * 5] * 8
    assert facts["iommu"] == "off"
    # Unknown is not a fault: nothing to warn about.
    assert gpu.pcie_findings(facts) == []


def test_gpu_less_node_still_reports_its_iommu():
    files = {CMDLINE: "BOOT_IMAGE=/vmlinuz ro intel_iommu=on\n"}
    facts = gpu.gather(lambda argv: pytest.fail("ran %r" % (argv,)), files.get, None, PROC,
                       proc_cmdline_path=CMDLINE, sys_class_iommu_path=IOMMU, list_dir=lambda path: ["dmar0"])
    assert facts == dict(gpu.empty_facts("nvidia-smi was not found"), iommu="on")


# ---- the IOMMU ---------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "cmdline, units, expected",
    [
        # The directory speaks first: no unit registered is no translation, whatever was asked.
        ("ro quiet", [], "off"),
        ("ro intel_iommu=on", [], "off"),
        ("ro intel_iommu=on", ["dmar0", "dmar1"], "on"),
        ("ro", ["ivhd0"], "on"),
        ("ro intel_iommu=on iommu=pt", ["dmar0"], "passthrough"),
        ("ro amd_iommu=on iommu.passthrough=1", ["ivhd0"], "passthrough"),
        ("ro iommu=pt iommu=nopt", ["dmar0"], "on"),
        ("ro iommu.passthrough=1 iommu.passthrough=0", ["dmar0"], "on"),
        # Unreadable directory: the command line alone.
        ("ro intel_iommu=off", None, "off"),
        ("ro amd_iommu=off iommu=pt", None, "off"),
        ("ro iommu=off", None, "off"),
        ("ro intel_iommu=on,igfx_off iommu=pt", None, "passthrough"),
        ("ro intel_iommu=on", None, "on"),
        ("ro quiet", None, None),
        # After "--" the arguments are init's, not the kernel's.
        ("ro quiet -- intel_iommu=on", None, None),
        (None, None, None),
    ],
)
def test_iommu_mode(cmdline, units, expected):
    assert gpu.iommu_mode(cmdline, units) == expected


def test_iommu_without_paths_is_unknown():
    node = Node(samples.box_answers(samples.rtx_pro_6000_x8()))
    assert gpu.gather(node.run, node.files.get, SMI, PROC)["iommu"] is None
    # A missing command line file with units registered: on, since nothing asks for passthrough.
    assert gpu.gather(node.run, node.files.get, SMI, PROC, proc_cmdline_path=CMDLINE,
                      sys_class_iommu_path=IOMMU, list_dir=lambda path: ["dmar0"])["iommu"] == "on"


# ---- real H200 recordings ----------------------------------------------------------------------

def test_h200x2_recorded_by_the_current_module_matches_the_core():
    """Recorded on a 2x H200 host by tools/lab/record-gpu-host.sh with this gpu_facts."""
    path = samples.FIXTURES / "h200x2"
    module = adhoc_facts(path / "gpu_facts.adhoc.txt")
    assert adhoc_facts(path / "gpu_facts_check.adhoc.txt") == module
    facts = gather_recording(path, module["nvidia_smi"])
    assert facts == module
    assert facts["count"] == 2
    assert [[g[key] for key in PCIE_KEYS] for g in facts["gpus"]] == [[5, 5, 16, 16, True]] * 2
    assert facts["topology"] == {
        "pairs": [{"gpu_a": 0, "gpu_b": 1, "link": "NV18", "type": "nvlink", "p2p_read": "OK", "p2p_write": "OK"}],
        "summary": "nvlink_all",
        "p2p": "ok",
    }
    # No IOMMU argument on the VM's command line and nothing in /sys/class/iommu.
    assert (path / samples.IOMMU_FILE).read_text() == ""
    assert "iommu" not in (path / samples.CMDLINE_FILE).read_text().split(" -- ")[0]
    assert facts["iommu"] == "off"
    assert gpu.pcie_findings(facts) == []


def test_ubuntu_h200x2_recording_parses_its_p2p_pcie_and_iommu():
    host = samples.FIXTURES / "ubuntu2404-h200x2"
    facts = gather_recording(host / "gpu")
    assert [g["uuid"] for g in facts["gpus"]] == [
        "GPU-c02ae735-0376-3b30-3056-08c2469df950", "GPU-db4dd2fe-1489-caac-c773-75a5a7c12826"]
    assert [[g[key] for key in PCIE_KEYS] for g in facts["gpus"]] == [[5, 5, 16, 16, True]] * 2
    assert facts["topology"]["pairs"] == [
        {"gpu_a": 0, "gpu_b": 1, "link": "NV18", "type": "nvlink", "p2p_read": "OK", "p2p_write": "OK"}]
    assert facts["topology"]["p2p"] == "ok"
    assert facts["iommu"] == "off"
    assert gpu.pcie_findings(facts) == []
    # The replayed answers are the host's raw ones, less the exit status line.
    for replayed, raw in (("topo-p2p-r.txt", "topo-p2p-r.txt"), ("topo-p2p-w.txt", "topo-p2p-w.txt"),
                          (samples.CMDLINE_FILE, "proc-cmdline.txt")):
        assert (host / "raw" / raw).read_text() == (host / "gpu" / replayed).read_text() + "exit status: 0\n"
    assert "\x1b[4m" in (host / "gpu" / "topo-p2p-r.txt").read_text()
    assert (host / "raw" / "sys-class-iommu.txt").read_text() == "total 0\nexit status: 0\n"
    # The combined query line is the older answer plus the PCIe answer's fields for the same GPU.
    pcie = [line.split(", ") for line in (host / "raw" / "query-pcie.csv").read_text().splitlines()[:-1]]
    combined = [line.split(", ") for line in (host / "gpu" / "query.csv").read_text().splitlines()]
    assert [row[:1] + row[5:6] + row[7:] for row in combined] == pcie
    # The combined list asked on a later VM of the same kind: only the UUIDs differ.
    full = [line.split(", ") for line in (host / "raw" / "query-full.csv").read_text().splitlines()]
    assert full[-1] == ["exit status: 0"]
    assert [row[:2] + row[3:] for row in full[:-1]] == [row[:2] + row[3:] for row in combined]
    assert [row[2] for row in full[:-1]] != [row[2] for row in combined]


def test_single_h200_has_no_pairs_and_its_own_iommu():
    facts = gather_recording(samples.FIXTURES / "h200")
    assert facts["count"] == 1
    assert facts["topology"] == {"pairs": [], "summary": "single", "p2p": None}
    assert facts["iommu"] == "off"
    assert [facts["gpus"][0][key] for key in PCIE_KEYS] == [5, 5, 16, 16, True]


# ---- the filter the preflight uses --------------------------------------------------------------

def test_filter_returns_the_findings_and_warns_only_when_asked(monkeypatch):
    warned = []
    monkeypatch.setattr(pcie_filter.Display, "warning", lambda self, msg, *args, **kwargs: warned.append(msg))
    facts, dummy = gather_box(samples.rtx_pro_6000_x8_troubled())
    findings = pcie_filter.FilterModule().filters()["pcie_findings"](facts)
    assert findings == gpu.pcie_findings(facts)
    assert warned == []
    assert pcie_filter.pcie_findings(facts, tp_size=4, warn=True) == gpu.pcie_findings(facts, 4)
    assert warned == ["hardware: " + iommu_message(3)]


@pytest.mark.parametrize("tp_size", [0, -2, "four", True, 2.5])
def test_filter_refuses_a_bad_tp_size(tp_size):
    facts, dummy = gather_box(samples.rtx_pro_6000_x8())
    with pytest.raises(AnsibleFilterError) as raised:
        pcie_filter.pcie_findings(facts, tp_size=tp_size)
    assert raised.value.message == "pcie_findings: tp_size must be a positive whole number or null, got %r" % (tp_size,)


def test_filter_refuses_what_is_not_gpu_facts():
    with pytest.raises(AnsibleFilterError) as raised:
        pcie_filter.pcie_findings(["GPU0"])
    assert raised.value.message == "pcie_findings: expects the gpu facts (a dict), got list"
