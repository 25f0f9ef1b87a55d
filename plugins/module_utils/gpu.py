# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a node's NVIDIA GPUs are, read from nvidia-smi and the loaded kernel module.

Pure parsing with no Ansible imports: every function takes the text a tool printed and
returns plain data, so unit tests feed recorded answers straight in. ``gather`` ties the
parsers together around two callables the caller supplies (run a command, read a file),
which keeps process and file access in the module and out of this file.

Nothing here raises for a host without GPUs, without a driver, or with a broken one: those
are answers (``present: False`` and a ``reason``), because fleets mix GPU and CPU nodes and
a half-upgraded driver is exactly what a play needs to see rather than crash on.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# The field list is part of the fact contract: its order is the CSV column order.
QUERY_FIELDS = (
    "index",
    "name",
    "uuid",
    "compute_cap",
    "memory.total",
    "pci.bus_id",
    "driver_version",
    "pcie.link.gen.current",
    "pcie.link.gen.max",
    "pcie.link.width.current",
    "pcie.link.width.max",
    "persistence_mode",
)
QUERY_ARGS = (
    "--query-gpu=" + ",".join(QUERY_FIELDS),
    "--format=csv,noheader,nounits",
)
TOPOLOGY_ARGS = ("topo", "-m")
P2P_READ_ARGS = ("topo", "-p2p", "r")
P2P_WRITE_ARGS = ("topo", "-p2p", "w")

# `nvidia-smi topo -p2p r|w` legend: OK, or why peer-to-peer is not possible for the pair
# (chipset, GPU, topology not supported, not supported, unknown).
P2P_OK = "OK"
P2P_CODES = ("OK", "CNS", "GNS", "TNS", "NS", "U")

IOMMU_OFF = "off"
IOMMU_PASSTHROUGH = "passthrough"
IOMMU_ON = "on"

# `nvidia-smi topo -m` legend: NV<n> is a bonded set of n NVLinks; the rest are PCIe paths
# of growing distance (older drivers print SOC where newer ones print SYS).
PCIE_LINKS = ("PIX", "PXB", "PHB", "NODE", "SYS", "SOC")
_NVLINK_RE = re.compile(r"^NV\d+$")
_ANSI_RE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_DEVICE_LABEL_RE = re.compile(r"^(GPU|NIC|CPU)\d+$")
_GPU_LABEL_RE = re.compile(r"^GPU(\d+)$")
_CUDA_VERSION_RE = re.compile(r"CUDA Version\s*:\s*(\d+\.\d+)")
_NVRM_RE = re.compile(r"^NVRM version:\s*(?P<kind>.*?)\s+(?P<version>\d+\.\d+(?:\.\d+)?)(?:\s|$)", re.M)
_NVML_LIB_RE = re.compile(r"NVML library version:\s*(\S+)")

MISMATCH_MARKER = "Driver/library version mismatch"
NO_DRIVER_MARKER = "couldn't communicate with the NVIDIA driver"
NO_DEVICES_MARKER = "No devices were found"

# modinfo's license string tells the two kernel module flavours apart: the open modules
# are dual-licensed, the proprietary ones carry NVIDIA's own licence.
OPEN_LICENSES = ("Dual MIT/GPL",)
PROPRIETARY_LICENSES = ("NVIDIA",)


def _clean(text):
    return _ANSI_RE.sub("", text or "")


def _na(value):
    """nvidia-smi prints [N/A], N/A or [Not Supported] for values a GPU cannot report."""
    value = value.strip()
    if not value or value.strip("[]") in ("N/A", "Not Supported", "Unknown Error"):
        return None
    return value


def _int_or_none(value):
    value = _na(value)
    if value is None:
        return None
    try:
        return int(float(value))
    except ValueError:
        return None


def _persistence(value):
    value = _na(value)
    if value == "Enabled":
        return True
    if value == "Disabled":
        return False
    return None


def split_capability(value):
    """'12.0' -> (12, 0); anything else -> (None, None)."""
    value = _na(value or "")
    if value is None:
        return None, None
    match = re.match(r"^(\d+)\.(\d+)$", value)
    if not match:
        return None, None
    return int(match.group(1)), int(match.group(2))


def parse_query_gpu(text):
    """Parse the answer to ``nvidia-smi`` with QUERY_ARGS into a list of GPU dicts.

    Returns (gpus, driver_version). The name is the only field that could hold a comma, so
    the fixed fields are taken from both ends and whatever is left in the middle is the name.
    """
    tail = len(QUERY_FIELDS) - 2
    gpus = []
    driver_versions = []
    for line in _clean(text).splitlines():
        if not line.strip():
            continue
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) < len(QUERY_FIELDS):
            raise ValueError("unexpected nvidia-smi query line: %r" % line)
        index = cells[0]
        name = ", ".join(cells[1:-tail])
        (uuid, compute_cap, memory, bus_id, driver,
         gen_current, gen_max, width_current, width_max, persistence) = cells[-tail:]
        try:
            index = int(index)
        except ValueError:
            raise ValueError("unexpected nvidia-smi query line: %r" % line)
        major, minor = split_capability(compute_cap)
        gpus.append(
            {
                "index": index,
                "name": name,
                "uuid": _na(uuid),
                "compute_capability": None if major is None else "%d.%d" % (major, minor),
                "major": major,
                "minor": minor,
                "memory_total_mib": _int_or_none(memory),
                "pci_bus_id": _na(bus_id),
                "pcie_link_gen_current": _int_or_none(gen_current),
                "pcie_link_gen_max": _int_or_none(gen_max),
                "pcie_link_width_current": _int_or_none(width_current),
                "pcie_link_width_max": _int_or_none(width_max),
                "persistence_mode": _persistence(persistence),
            }
        )
        driver = _na(driver)
        if driver and driver not in driver_versions:
            driver_versions.append(driver)
    gpus.sort(key=lambda gpu: gpu["index"])
    return gpus, (driver_versions[0] if driver_versions else None)


def parse_cuda_version(text):
    """The CUDA version the driver supports, from plain ``nvidia-smi`` or ``nvidia-smi -q``."""
    match = _CUDA_VERSION_RE.search(_clean(text))
    return match.group(1) if match else None


def link_type(link):
    """Classify one ``topo -m`` cell: 'nvlink', 'pcie', or 'unknown' for codes not in the legend."""
    if _NVLINK_RE.match(link):
        return "nvlink"
    if link in PCIE_LINKS:
        return "pcie"
    return "unknown"


def parse_topology(text):
    """Parse the ``nvidia-smi topo -m`` matrix into GPU pairs.

    The header names the device columns (GPU0.., NIC0..) followed by columns such as
    "CPU Affinity", "NUMA Affinity" and "GPU NUMA ID", whose values are not links; only the
    leading device columns are read, and only GPU-to-GPU cells become pairs. Returns a list
    of {gpu_a, gpu_b, link, type} with gpu_a < gpu_b, one per unordered pair.
    """
    lines = [line for line in _clean(text).splitlines() if line.strip()]
    header = None
    for position, line in enumerate(lines):
        tokens = line.split()
        if tokens and _DEVICE_LABEL_RE.match(tokens[0]) and line[:1].isspace():
            header = position
            break
    if header is None:
        return []
    columns = []
    for token in lines[header].split():
        if not _DEVICE_LABEL_RE.match(token):
            break
        columns.append(token)
    seen = {}
    for line in lines[header + 1:]:
        tokens = line.split()
        if not tokens or line[:1].isspace():
            continue
        row = _GPU_LABEL_RE.match(tokens[0])
        if not row:
            if tokens[0].rstrip(":") == "Legend" or not _DEVICE_LABEL_RE.match(tokens[0]):
                break
            continue
        gpu_a = int(row.group(1))
        for column, cell in zip(columns, tokens[1:1 + len(columns)]):
            col = _GPU_LABEL_RE.match(column)
            if not col:
                continue
            gpu_b = int(col.group(1))
            if gpu_b == gpu_a or cell == "X":
                continue
            key = (min(gpu_a, gpu_b), max(gpu_a, gpu_b))
            # The matrix is symmetric; the first cell read for a pair stands.
            seen.setdefault(key, cell)
    return [
        {"gpu_a": a, "gpu_b": b, "link": link, "type": link_type(link)}
        for (a, b), link in sorted(seen.items())
    ]


def topology_summary(count, pairs):
    """One word for how the GPUs are linked: the service role picks its all-reduce from it."""
    if count == 1:
        return "single"
    if not count or not pairs:
        return "none"
    types = set(pair["type"] for pair in pairs)
    if types == set(["nvlink"]):
        return "nvlink_all"
    if types == set(["pcie"]):
        return "pcie_only"
    # Different link kinds, or a code outside the legend: neither uniform path can be assumed.
    return "mixed"


def parse_p2p(text):
    """Parse a ``nvidia-smi topo -p2p r`` (or ``w``) matrix into {(gpu_a, gpu_b): code}, gpu_a < gpu_b.

    Unlike ``topo -m``, header and rows both start with a blank, and only GPUs are listed.
    The matrix is read in both directions and a pair is OK only when both are; otherwise the
    first code that is not OK stands, so the answer never claims more than the driver allows.
    """
    columns = None
    cells = []
    for line in _clean(text).splitlines():
        tokens = line.split()
        if not tokens:
            continue
        if tokens[0].rstrip(":") == "Legend":
            break
        if columns is None:
            if all(_GPU_LABEL_RE.match(token) for token in tokens):
                columns = [int(_GPU_LABEL_RE.match(token).group(1)) for token in tokens]
            continue
        row = _GPU_LABEL_RE.match(tokens[0])
        if not row:
            continue
        gpu_a = int(row.group(1))
        for gpu_b, cell in zip(columns, tokens[1:]):
            if gpu_b != gpu_a and cell != "X":
                cells.append(((min(gpu_a, gpu_b), max(gpu_a, gpu_b)), cell))
    codes = {}
    for key, cell in cells:
        if codes.get(key, P2P_OK) == P2P_OK:
            codes[key] = cell
    return codes


def p2p_summary(indices, read, write):
    """'ok' when every pair reads and writes peer to peer, 'none' when no pair does either,
    'partial' in between; None for fewer than two GPUs or when a matrix is missing a pair."""
    indices = sorted(indices)
    if len(indices) < 2 or read is None or write is None:
        return None
    codes = []
    for position, gpu_a in enumerate(indices):
        for gpu_b in indices[position + 1:]:
            codes += [read.get((gpu_a, gpu_b)), write.get((gpu_a, gpu_b))]
    if None in codes:
        return None
    if all(code == P2P_OK for code in codes):
        return "ok"
    if P2P_OK not in codes:
        return "none"
    return "partial"


def parse_cmdline_iommu(text):
    """What the kernel command line asks of the IOMMU: 'off', 'passthrough', 'on' or None.

    Reads ``intel_iommu=``, ``amd_iommu=``, ``iommu=`` (off, pt, nopt) and
    ``iommu.passthrough=``; arguments after ``--`` belong to init and are not the kernel's.
    Switching the IOMMU off wins over passthrough, passthrough over on; the last of
    ``iommu=pt``/``nopt``/``iommu.passthrough=`` stands, as in the kernel.
    """
    tokens = _clean(text).split()
    if "--" in tokens:
        tokens = tokens[:tokens.index("--")]
    off = enabled = False
    passthrough = None
    for token in tokens:
        key, dummy, value = token.partition("=")
        values = value.split(",")
        if key in ("intel_iommu", "amd_iommu"):
            if "off" in values:
                off = True
            elif "on" in values or "force_enable" in values:
                enabled = True
        elif key == "iommu":
            if "off" in values:
                off = True
            if "pt" in values:
                passthrough = True
            elif "nopt" in values:
                passthrough = False
        elif key == "iommu.passthrough":
            passthrough = value.lower() in ("1", "y", "yes", "on", "true")
    if off:
        return IOMMU_OFF
    if passthrough:
        return IOMMU_PASSTHROUGH
    if enabled:
        return IOMMU_ON
    return None


def iommu_mode(cmdline, units):
    """How the IOMMU treats device traffic: 'off', 'passthrough', 'on' or None when unknown.

    ``units`` lists /sys/class/iommu (None when it cannot be read). An IOMMU translates only
    once a hardware unit (dmar0, ivhd0, ...) has registered there, so an empty listing is off
    whatever the command line asks; a unit there is on unless the command line asks for
    passthrough. Without the listing, the command line alone answers.
    """
    asked = parse_cmdline_iommu(cmdline) if cmdline is not None else None
    if units is None:
        return asked
    if not units:
        return IOMMU_OFF
    return IOMMU_PASSTHROUGH if asked == IOMMU_PASSTHROUGH else IOMMU_ON


def parse_proc_version(text):
    """Parse /proc/driver/nvidia/version: (driver version, open kernel module or not).

    The open modules announce themselves as "NVIDIA UNIX Open Kernel Module for x86_64",
    the proprietary ones as "NVIDIA UNIX x86_64 Kernel Module".
    """
    match = _NVRM_RE.search(_clean(text))
    if not match:
        return None, None
    return match.group("version"), "Open Kernel Module" in match.group("kind")


def parse_modinfo_license(text):
    """Parse ``modinfo -F license nvidia`` (or a full ``modinfo`` answer): open or not, or None."""
    for line in _clean(text).splitlines():
        key, sep, rest = line.partition(":")
        if not sep:
            value = key.strip()
        elif key.strip() == "license":
            value = rest.strip()
        else:
            continue
        if value in OPEN_LICENSES:
            return True
        if value in PROPRIETARY_LICENSES:
            return False
    return None


def _first_line(text, marker):
    for line in _clean(text).splitlines():
        if marker in line:
            return line.strip()
    return None


def empty_facts(reason):
    """The fact shape with nothing found; every answer starts from it."""
    return {
        "present": False,
        "reason": reason,
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


def gather(run, read_file, nvidia_smi, proc_driver_version_path, modinfo=None,
           proc_cmdline_path=None, sys_class_iommu_path=None, list_dir=None):
    """Collect the gpu facts.

    run(argv) -> (rc, stdout, stderr); read_file(path) -> text or None when absent;
    list_dir(path) -> the names in a directory or None when it cannot be read;
    nvidia_smi is the executable's path or None when there is none; modinfo likewise.
    """
    facts = empty_facts(None)
    facts["nvidia_smi"] = nvidia_smi

    # The IOMMU is the host's, not the GPUs': it is read on nodes without GPUs as well.
    cmdline = read_file(proc_cmdline_path) if proc_cmdline_path else None
    units = list_dir(sys_class_iommu_path) if sys_class_iommu_path and list_dir else None
    if cmdline is not None or units is not None:
        facts["iommu"] = iommu_mode(cmdline, units)

    # The loaded kernel module speaks for itself even when user space is broken or missing,
    # which is what tells a driver/library mismatch apart from "no driver".
    proc_text = read_file(proc_driver_version_path) if proc_driver_version_path else None
    if proc_text:
        version, is_open = parse_proc_version(proc_text)
        facts["driver_version"] = version
        if is_open is not None:
            facts["kernel_module_open"] = is_open
            facts["kernel_module_source"] = "proc"
    if facts["kernel_module_open"] is None and modinfo:
        rc, out, dummy = run([modinfo, "-F", "license", "nvidia"])
        if rc == 0:
            is_open = parse_modinfo_license(out)
            if is_open is not None:
                facts["kernel_module_open"] = is_open
                facts["kernel_module_source"] = "modinfo"

    if not nvidia_smi:
        facts["reason"] = "nvidia-smi was not found"
        return facts

    rc, out, err = run([nvidia_smi] + list(QUERY_ARGS))
    both = (out or "") + "\n" + (err or "")
    if rc != 0:
        mismatch = _first_line(both, MISMATCH_MARKER)
        if mismatch:
            facts["driver_mismatch"] = True
            library = _NVML_LIB_RE.search(both)
            facts["nvml_library_version"] = library.group(1) if library else None
            facts["reason"] = "%s: the loaded kernel module (%s) is not the installed NVML library (%s); " \
                "reload the nvidia modules or reboot" % (
                    mismatch, facts["driver_version"] or "unknown", facts["nvml_library_version"] or "unknown")
            return facts
        for marker in (NO_DRIVER_MARKER, NO_DEVICES_MARKER):
            line = _first_line(both, marker)
            if line:
                facts["reason"] = line
                return facts
        detail = " ".join(both.split())
        facts["reason"] = "nvidia-smi exited with %d: %s" % (rc, detail or "no output")
        return facts

    try:
        gpus, query_driver = parse_query_gpu(out)
    except ValueError as exc:
        facts["reason"] = str(exc)
        return facts
    if not gpus:
        facts["reason"] = "nvidia-smi listed no GPUs"
        return facts

    facts["present"] = True
    facts["gpus"] = gpus
    facts["count"] = len(gpus)
    # nvidia-smi's answer is the driver the library talks to; /proc is the fallback only.
    facts["driver_version"] = query_driver or facts["driver_version"]
    facts["capability_majors"] = sorted(set(gpu["major"] for gpu in gpus if gpu["major"] is not None))

    rc, out, dummy = run([nvidia_smi])
    if rc == 0:
        facts["cuda_driver_version"] = parse_cuda_version(out)

    if len(gpus) > 1:
        rc, out, dummy = run([nvidia_smi] + list(TOPOLOGY_ARGS))
        pairs = parse_topology(out) if rc == 0 else []
        # Drivers that predate `topo -p2p` refuse it: the codes are then unknown (null).
        matrices = []
        for args in (P2P_READ_ARGS, P2P_WRITE_ARGS):
            rc, out, dummy = run([nvidia_smi] + list(args))
            matrices.append(parse_p2p(out) if rc == 0 else None)
        read, write = matrices
        for pair in pairs:
            key = (pair["gpu_a"], pair["gpu_b"])
            pair["p2p_read"] = read.get(key) if read is not None else None
            pair["p2p_write"] = write.get(key) if write is not None else None
        facts["topology"]["pairs"] = pairs
        facts["topology"]["p2p"] = p2p_summary([gpu["index"] for gpu in gpus], read, write)
    facts["topology"]["summary"] = topology_summary(len(gpus), facts["topology"]["pairs"])
    return facts


# ---- what tensor parallelism over PCIe needs from the node ---------------------------------

# Why a pair cannot reach its peer, by `topo -p2p` code.
_P2P_CAUSES = {
    "CNS": "the chipset or root complex does not pass peer traffic (across CPU sockets, or PCIe ACS)",
    "TNS": "the PCIe path between them does not allow it (a switch with ACS on, or across sockets)",
    "GNS": "the GPU model does not support peer-to-peer",
    "NS": "the driver reports peer-to-peer as not supported",
    "U": "the driver cannot tell",
}


def _gpu_list(indices):
    indices = list(indices)
    if len(indices) > 2 and indices == list(range(indices[0], indices[-1] + 1)):
        return "GPU%d to GPU%d" % (indices[0], indices[-1])
    return ", ".join("GPU%d" % index for index in indices)


def tp_gpus(facts, tp_size=None):
    """The GPU indices tensor parallelism spans: the first ``tp_size`` (default: all) by index,
    as SGLang places TP ranks from GPU 0 upwards."""
    indices = sorted(gpu["index"] for gpu in facts.get("gpus") or [])
    if tp_size is None or str(tp_size).strip() == "":
        return indices
    return indices[:int(tp_size)]


def pcie_findings(facts, tp_size=None):
    """What on this node slows down or hangs tensor parallelism over PCIe, as a list of
    {check, gpus, message}; empty for nodes without GPUs, with one GPU, or with TP 1.

    ``check`` is ``p2p`` (a pair TP spans lacks peer-to-peer read or write), ``link`` (a GPU's
    PCIe link trained below its maximum generation or width), ``persistence`` (persistence mode
    off) or ``iommu`` (the IOMMU translates and the GPUs talk over PCIe only). Unknown values
    (null in the facts) are not findings: an old driver's silence is not a fault.
    """
    if not facts or not facts.get("present") or int(facts.get("count") or 0) < 2:
        return []
    span = tp_gpus(facts, tp_size)
    if len(span) < 2:
        return []
    members = set(span)
    tp = "tensor parallelism (TP %d: %s)" % (len(span), _gpu_list(span))
    by_index = dict((gpu["index"], gpu) for gpu in facts["gpus"])
    findings = []

    pairs = [pair for pair in (facts.get("topology") or {}).get("pairs") or []
             if pair["gpu_a"] in members and pair["gpu_b"] in members]
    lacking = [pair for pair in pairs
               if pair.get("p2p_read") not in (None, P2P_OK) or pair.get("p2p_write") not in (None, P2P_OK)]
    if lacking:
        # Pairs grouped by what they lack, in the order met: "GPU0-GPU4, GPU0-GPU5 (read CNS, write CNS)".
        groups, codes = {}, []
        for pair in lacking:
            read, write = pair.get("p2p_read") or "unknown", pair.get("p2p_write") or "unknown"
            groups.setdefault((read, write), []).append("GPU%d-GPU%d" % (pair["gpu_a"], pair["gpu_b"]))
            for code in (pair.get("p2p_read"), pair.get("p2p_write")):
                if code not in (None, P2P_OK) and code not in codes:
                    codes.append(code)
        gpus = sorted(set(pair["gpu_a"] for pair in lacking) | set(pair["gpu_b"] for pair in lacking))
        findings.append({
            "check": "p2p",
            "gpus": gpus,
            "message": "%s: no peer-to-peer between GPUs that %s spans, so NCCL copies through "
                       "system memory or hangs. Likely cause: %s. Fix: disable PCIe ACS in the BIOS "
                       "and set iommu=pt on the kernel command line, or keep TP to GPUs that reach "
                       "each other." % (
                           "; ".join("%s (read %s, write %s)" % (", ".join(names), read, write)
                                     for (read, write), names in groups.items()),
                           tp,
                           "; ".join("%s, %s" % (code, _P2P_CAUSES.get(code, "a code outside nvidia-smi's legend"))
                                     for code in codes)),
        })

    slow, slow_gpus = [], []
    for index in span:
        gpu = by_index[index]
        gen, gen_max = gpu.get("pcie_link_gen_current"), gpu.get("pcie_link_gen_max")
        width, width_max = gpu.get("pcie_link_width_current"), gpu.get("pcie_link_width_max")
        below_gen = None not in (gen, gen_max) and gen < gen_max
        below_width = None not in (width, width_max) and width < width_max
        if below_gen or below_width:
            slow_gpus.append(index)
            slow.append("GPU%d (%s) Gen%s x%s of Gen%s x%s" % (
                index, gpu.get("pci_bus_id") or "unknown bus", gen, width, gen_max, width_max))
    if slow:
        findings.append({
            "check": "link",
            "gpus": slow_gpus,
            "message": "%s: PCIe link below its maximum, and every all-reduce of %s waits for the "
                       "slowest link. Likely cause: a card or riser not fully seated, a slot wired "
                       "narrower, or the slot's speed capped in the BIOS; the generation also drops "
                       "while a GPU idles, so confirm under load (nvidia-smi -q -d PCIE). Fix: reseat "
                       "the card or riser, and set the slot's link speed to its maximum (or Auto) in "
                       "the BIOS." % ("; ".join(slow), tp),
        })

    off = [index for index in span if by_index[index].get("persistence_mode") is False]
    if off:
        findings.append({
            "check": "persistence",
            "gpus": off,
            "message": "%s: persistence mode is off, so the driver tears these GPUs down whenever no "
                       "process holds them and initialises them again at every start of the server "
                       "(slow starts and a longer NCCL set-up for %s). Fix: run the nvidia-persistenced "
                       "service (systemctl enable --now nvidia-persistenced), or nvidia-smi -pm 1 until "
                       "the next reboot." % (_gpu_list(off), tp.replace(" (", ", ").rstrip(")")),
        })

    topology = (facts.get("topology") or {}).get("summary")
    if facts.get("iommu") == IOMMU_ON and topology == "pcie_only":
        findings.append({
            "check": "iommu",
            "gpus": list(span),
            "message": "%s: the IOMMU translates device traffic (not passthrough) and the GPUs talk over "
                       "PCIe only, so peer-to-peer traffic of %s is redirected through the root complex: "
                       "NCCL hangs or falls back to system memory. Fix: add iommu=pt to the kernel "
                       "command line (with intel_iommu=on or amd_iommu=on where the IOMMU is needed) and "
                       "reboot, or turn the IOMMU and PCIe ACS off in the BIOS." % (_gpu_list(span), tp),
        })
    return findings
