"""nvidia-smi answers for GPU boxes this machine does not have, written in nvidia-smi's formats.

Each box is described by a few numbers (GPU model, capability, memory, driver, how the GPUs are
linked, their PCIe links and persistence, peer-to-peer codes, the kernel command line and IOMMU
units); the functions below print what nvidia-smi, the kernel module and the kernel print for
such a box: `--query-gpu=... --format=csv,noheader,nounits`, the plain `nvidia-smi` table,
`topo -m`, `topo -p2p r` and `topo -p2p w`, /proc/driver/nvidia/version, /proc/cmdline and the
names in /sys/class/iommu. The layouts follow the real H200 answers recorded under
tests/fixtures/gpu/h200/ and tests/fixtures/gpu/ubuntu2404-h200x2/ (tabs, the underline escape
around the matrix headers, the leading blank of the p2p rows, the legends).

`write_recording` lays a box out as a directory the stand-in nvidia-smi
(tests/fixtures/gpu/stand-in/nvidia-smi) replays, so the module can be run through Ansible
against boxes that exist only here.
"""
from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "gpu"
STAND_IN = FIXTURES / "stand-in" / "nvidia-smi"
QUERY_ARGV = [
    "--query-gpu=index,name,uuid,compute_cap,memory.total,pci.bus_id,driver_version,"
    "pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max,persistence_mode",
    "--format=csv,noheader,nounits",
]
# File name in a recording directory -> the nvidia-smi arguments that printed it.
RECORDED_COMMANDS = {
    "query.csv": QUERY_ARGV,
    "nvidia-smi.txt": [],
    "topo.txt": ["topo", "-m"],
    "topo-p2p-r.txt": ["topo", "-p2p", "r"],
    "topo-p2p-w.txt": ["topo", "-p2p", "w"],
}
# Files of a recording that are not nvidia-smi answers: the kernel command line, and the names
# /sys/class/iommu held, one a line (a directory git could not keep when it is empty).
CMDLINE_FILE = "proc_cmdline.txt"
IOMMU_FILE = "sys_class_iommu.txt"

TOPO_LEGEND = """
Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
"""
P2P_LEGEND = """
Legend:

  X    = Self
  OK   = Status Ok
  CNS  = Chipset not supported
  GNS  = GPU not supported
  TNS  = Topology not supported
  NS   = Not supported
  U    = Unknown
"""
NO_DRIVER = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
    "Make sure that the latest NVIDIA driver is installed and running.\n\n"
)
NO_DEVICES = "No devices were found\n"


@dataclass
class Gpu:
    name: str
    capability: str
    memory_mib: int
    bus_id: str
    numa: int = 0
    # PCIe generation and width, current and maximum; None prints [N/A].
    link: Tuple[Optional[int], ...] = (5, 5, 16, 16)
    persistence: Optional[bool] = True


@dataclass
class Box:
    """One host: its GPUs, driver, and the link code of every GPU pair."""

    gpus: List[Gpu]
    driver: str
    cuda: str
    open_module: bool
    links: Dict[Tuple[int, int], str] = field(default_factory=dict)
    nics: int = 0
    cpu_affinity: Tuple[str, ...] = ("0-55,112-167", "56-111,168-223")
    # Peer-to-peer codes per ordered pair (a, b) that are not OK; every other pair reads OK.
    p2p_read: Dict[Tuple[int, int], str] = field(default_factory=dict)
    p2p_write: Dict[Tuple[int, int], str] = field(default_factory=dict)
    cmdline: str = "BOOT_IMAGE=/boot/vmlinuz-6.8.0-87-generic root=UUID=3f1c9e52-7d4a-4b8e-9a61-2c5d8e0f4b13 ro quiet"
    iommu_units: Tuple[str, ...] = ()

    def link(self, a: int, b: int) -> str:
        return self.links[(min(a, b), max(a, b))]

    def uuid(self, index: int) -> str:
        return "GPU-%08x-%04x-%04x-%04x-%012x" % (0x5F3C1C40 + index, 0x8A0B, 0x4F6E, 0x9D57, 0x0C1E2A3B4C50 + index)


def _value(value) -> str:
    return "[N/A]" if value is None else str(value)


def _persistence(value: Optional[bool]) -> str:
    return "[N/A]" if value is None else "Enabled" if value else "Disabled"


def query_csv(box: Box) -> str:
    return "".join(
        "%d, %s, %s, %s, %d, %s, %s, %s, %s\n" % (
            i, g.name, box.uuid(i), g.capability, g.memory_mib, g.bus_id, box.driver,
            ", ".join(_value(v) for v in g.link), _persistence(g.persistence))
        for i, g in enumerate(box.gpus)
    )


def smi_table(box: Box) -> str:
    rule = "+-----------------------------------------+------------------------+----------------------+\n"
    lines = [
        "Sun Nov 29 12:00:00 2026       \n",
        "+-----------------------------------------------------------------------------------------+\n",
        "| NVIDIA-SMI %-22s Driver Version: %-14s CUDA Version: %-9s|\n" % (box.driver, box.driver, box.cuda),
        rule,
        "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |\n",
        "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |\n",
        "|                                         |                        |               MIG M. |\n",
        "|=========================================+========================+======================|\n",
    ]
    for i, g in enumerate(box.gpus):
        # nvidia-smi cuts names longer than the column and marks the cut with "...".
        name = g.name if len(g.name) <= 29 else g.name[:26] + "..."
        lines.append("| %3d  %-29s  On  |   %16s Off |                    0 |\n" % (i, name, g.bus_id))
        lines.append("| N/A   35C    P0             90W /  600W |       0MiB / %6dMiB |      0%%      Default |\n"
                     % g.memory_mib)
        lines.append("|                                         |                        |                  N/A |\n")
        lines.append(rule)
    return "".join(lines)


def topo_matrix(box: Box) -> str:
    n = len(box.gpus)
    labels = ["GPU%d" % i for i in range(n)] + ["NIC%d" % i for i in range(box.nics)]
    out = ["\t\x1b[4m" + "\t".join(labels + ["CPU Affinity", "NUMA Affinity", "GPU NUMA ID"]) + "\x1b[0m\n"]
    for i, g in enumerate(box.gpus):
        cells = [" X " if j == i else box.link(i, j) for j in range(n)]
        cells += ["NODE" if k % 2 == g.numa else "SYS" for k in range(box.nics)]
        cells += [box.cpu_affinity[g.numa], str(g.numa), "", "N/A"]
        out.append("GPU%d\t" % i + "\t".join(cells) + "\n")
    for k in range(box.nics):
        cells = ["NODE" if k % 2 == g.numa else "SYS" for g in box.gpus]
        cells += [" X " if j == k else "SYS" for j in range(box.nics)]
        out.append("NIC%d\t" % k + "\t".join(cells) + "\n")
    out.append(TOPO_LEGEND)
    if box.nics:
        out.append("\nNIC Legend:\n\n" + "".join("  NIC%d: mlx5_%d\n" % (k, k) for k in range(box.nics)))
    return "".join(out)


def p2p_matrix(box: Box, codes: Dict[Tuple[int, int], str]) -> str:
    """`topo -p2p r|w`: unlike topo -m, the header and every row start with a blank."""
    n = len(box.gpus)
    out = [" \t\x1b[4m" + "".join("GPU%d\t" % i for i in range(n)) + "\x1b[0m\n"]
    for i in range(n):
        cells = ["X" if j == i else codes.get((i, j), "OK") for j in range(n)]
        out.append(" GPU%d\t" % i + "".join(cell + "\t" for cell in cells) + "\n")
    out.append(P2P_LEGEND)
    return "".join(out)


def proc_version(driver: str, open_module: bool) -> str:
    if open_module:
        kind = "NVIDIA UNIX Open Kernel Module for x86_64"
        tail = "Release Build  (dvs-builder@U22-I3-AF03-09-1)  Thu Sep 18 20:26:48 UTC 2025"
    else:
        kind = "NVIDIA UNIX x86_64 Kernel Module"
        tail = "Tue Jul  8 18:07:36 UTC 2025"
    return "NVRM version: %s  %s  %s\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14+deb12u1) \n" % (
        kind, driver, tail)


def mismatch_answer(library: str) -> str:
    return "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: %s\n" % library


def write_recording(dest: Path, answers: Dict[str, Tuple[int, str]], proc: Optional[str] = None,
                    stand_in: bool = True, box: Optional[Box] = None) -> Path:
    """Lay out answers {file: (rc, stdout)}, by default with the stand-in nvidia-smi beside them.

    Returns the stand-in's path; /proc/driver/nvidia/version's text goes to `proc_version.txt`,
    and a box's kernel command line and IOMMU units to CMDLINE_FILE and IOMMU_FILE.
    """
    dest.mkdir(parents=True, exist_ok=True)
    if box is not None:
        (dest / CMDLINE_FILE).write_text(box.cmdline + "\n")
        (dest / IOMMU_FILE).write_text("".join(unit + "\n" for unit in box.iommu_units))
    commands = {}
    for name, (rc, text) in answers.items():
        (dest / name).write_text(text)
        if rc:
            (dest / (name + ".rc")).write_text("%d\n" % rc)
        commands[name] = RECORDED_COMMANDS[name]
    (dest / "commands.json").write_text(json.dumps(commands, indent=2) + "\n")
    if proc is not None:
        (dest / "proc_version.txt").write_text(proc)
    if not stand_in:
        return STAND_IN
    copy = dest / "nvidia-smi"
    shutil.copy2(STAND_IN, copy)
    return copy


def box_answers(box: Box) -> Dict[str, Tuple[int, str]]:
    return {
        "query.csv": (0, query_csv(box)),
        "nvidia-smi.txt": (0, smi_table(box)),
        "topo.txt": (0, topo_matrix(box)),
        "topo-p2p-r.txt": (0, p2p_matrix(box, box.p2p_read)),
        "topo-p2p-w.txt": (0, p2p_matrix(box, box.p2p_write)),
    }


def iommu_dir(recording: Path, dest: Path) -> Path:
    """A directory holding the names a recording's IOMMU_FILE lists, for sys_class_iommu_path."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in (recording / IOMMU_FILE).read_text().split():
        (dest / name).write_text("")
    return dest


def failing_answers(rc: int, text: str) -> Dict[str, Tuple[int, str]]:
    """nvidia-smi fails the same way whatever it is asked."""
    return {name: (rc, text) for name in RECORDED_COMMANDS}


def recorded_part(facts, recorded):
    """The part of ``facts`` that a recording made by an older gpu_facts holds: its keys only,
    so the core of today can be compared with what the module printed then."""
    if isinstance(recorded, dict):
        return {key: recorded_part(facts[key], value) for key, value in recorded.items()}
    if isinstance(recorded, list):
        return [recorded_part(fact, value) for fact, value in zip(facts, recorded)] + facts[len(recorded):]
    return facts


# ---- the boxes ------------------------------------------------------------------------------

def _pcie_two_sockets(gpus: List[Gpu]) -> Dict[Tuple[int, int], str]:
    """PCIe only: neighbours behind one switch are PIX, same socket NODE, across sockets SYS."""
    links = {}
    for a in range(len(gpus)):
        for b in range(a + 1, len(gpus)):
            if gpus[a].numa != gpus[b].numa:
                links[(a, b)] = "SYS"
            elif a // 2 == b // 2:
                links[(a, b)] = "PIX"
            else:
                links[(a, b)] = "NODE"
    return links


def rtx_pro_6000_x8() -> Box:
    """8x RTX PRO 6000 Blackwell Server Edition over PCIe, driver 580, open module: every link
    Gen5 x16, persistence on, peer-to-peer OK between all pairs, the IOMMU in passthrough."""
    buses = ["17", "2A", "3D", "63", "9B", "AB", "BD", "E3"]
    gpus = [
        Gpu("NVIDIA RTX PRO 6000 Blackwell Server Edition", "12.0", 97887, "00000000:%s:00.0" % bus, numa=i // 4)
        for i, bus in enumerate(buses)
    ]
    return Box(gpus, driver="580.95.05", cuda="13.0", open_module=True, links=_pcie_two_sockets(gpus),
               cmdline="BOOT_IMAGE=/boot/vmlinuz-6.8.0-87-generic root=UUID=3f1c9e52-7d4a-4b8e-9a61-2c5d8e0f4b13"
                       " ro intel_iommu=on iommu=pt quiet",
               iommu_units=("dmar0", "dmar1", "dmar2", "dmar3"))


def rtx_pro_6000_x8_troubled() -> Box:
    """The same box as sold broken: the chipset refuses peer-to-peer across the sockets, one
    card trained down to Gen4 x8, persistence off on two GPUs, the IOMMU translating."""
    box = rtx_pro_6000_x8()
    for a in range(4):
        for b in range(4, 8):
            box.p2p_read[(a, b)] = box.p2p_read[(b, a)] = "CNS"
            box.p2p_write[(a, b)] = box.p2p_write[(b, a)] = "CNS"
    box.gpus[5].link = (4, 5, 8, 16)
    box.gpus[6].persistence = False
    box.gpus[7].persistence = False
    box.cmdline = "BOOT_IMAGE=/boot/vmlinuz-6.8.0-87-generic root=UUID=3f1c9e52-7d4a-4b8e-9a61-2c5d8e0f4b13 ro intel_iommu=on quiet"
    return box


def h100_sxm_x8() -> Box:
    """8x H100 SXM on NVSwitch: every pair NV18; four NICs in the matrix."""
    buses = ["18", "2A", "3A", "5D", "9A", "AB", "BA", "DB"]
    gpus = [Gpu("NVIDIA H100 80GB HBM3", "9.0", 81559, "00000000:%s:00.0" % bus, numa=i // 4)
            for i, bus in enumerate(buses)]
    links = {(a, b): "NV18" for a in range(8) for b in range(a + 1, 8)}
    return Box(gpus, driver="580.65.06", cuda="13.0", open_module=False, links=links, nics=4)


def mixed_box() -> Box:
    """Two H100 NVL joined by an NVLink bridge, plus two RTX PRO 6000 Workstation on PCIe."""
    gpus = [
        Gpu("NVIDIA H100 NVL", "9.0", 95830, "00000000:41:00.0", numa=0),
        Gpu("NVIDIA H100 NVL", "9.0", 95830, "00000000:42:00.0", numa=0),
        Gpu("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "12.0", 97887, "00000000:C1:00.0", numa=1),
        Gpu("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "12.0", 97887, "00000000:C2:00.0", numa=1),
    ]
    links = {(0, 1): "NV12", (0, 2): "SYS", (0, 3): "SYS", (1, 2): "SYS", (1, 3): "SYS", (2, 3): "PHB"}
    return Box(gpus, driver="580.95.05", cuda="13.0", open_module=True, links=links)


def below_cuda13_floor() -> Box:
    """One RTX PRO 6000 Blackwell Workstation on driver 570, which tops out at CUDA 12.8."""
    gpus = [Gpu("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "12.0", 97887, "00000000:01:00.0")]
    return Box(gpus, driver="570.172.08", cuda="12.8", open_module=True)


# Boxes kept as committed recordings, for labs that replay them with the stand-in in a container.
COMMITTED = {"rtx-pro-6000-x8": rtx_pro_6000_x8}


def write_committed(root: Path = FIXTURES) -> None:
    for name, make in COMMITTED.items():
        box = make()
        write_recording(root / name, box_answers(box), proc_version(box.driver, box.open_module), stand_in=False,
                        box=box)


if __name__ == "__main__":
    write_committed()
