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
)
QUERY_ARGS = (
    "--query-gpu=" + ",".join(QUERY_FIELDS),
    "--format=csv,noheader,nounits",
)
TOPOLOGY_ARGS = ("topo", "-m")

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
    gpus = []
    driver_versions = []
    for line in _clean(text).splitlines():
        if not line.strip():
            continue
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) < len(QUERY_FIELDS):
            raise ValueError("unexpected nvidia-smi query line: %r" % line)
        index, uuid, compute_cap, memory, bus_id, driver = (
            cells[0], cells[-5], cells[-4], cells[-3], cells[-2], cells[-1],
        )
        name = ", ".join(cells[1:-5])
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
        "topology": {"pairs": [], "summary": "none"},
        "nvidia_smi": None,
    }


def gather(run, read_file, nvidia_smi, proc_driver_version_path, modinfo=None):
    """Collect the gpu facts.

    run(argv) -> (rc, stdout, stderr); read_file(path) -> text or None when absent;
    nvidia_smi is the executable's path or None when there is none; modinfo likewise.
    """
    facts = empty_facts(None)
    facts["nvidia_smi"] = nvidia_smi

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
        facts["topology"]["pairs"] = pairs
    facts["topology"]["summary"] = topology_summary(len(gpus), facts["topology"]["pairs"])
    return facts
