# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NCCL all-reduce smoke test: the payload run by a venv's python, its runner and its parser.

No Ansible imports: the module blackwell.sglang.nccl_smoke is a thin wrapper, and the unit
tests import this file directly. The payload is kept as source text because it runs under
another interpreter (the SGLang venv's, which holds torch), not under the module's.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

from ansible_collections.blackwell.sglang.plugins.module_utils import sandbox_run

# Marks the one line of the payload's stdout that is the report; NCCL and torch may print
# their own lines around it.
REPORT_KEY = "nccl_smoke"
REPORT_VERSION = 1

DEFAULT_SIZES_KIB = [64, 1024, 16384, 262144]
DEFAULT_TIMEOUT = 60

# The likely causes of an all-reduce that hangs or returns wrong sums on PCIe boxes.
LIKELY_CAUSES = (
    "the IOMMU translating peer-to-peer DMA (iommu=pt on the kernel command line is the usual "
    "remedy), PCIe ACS redirecting peer-to-peer traffic through the root complex, "
    "or BIOS settings (ACS, IOMMU/VT-d, Above 4G decoding, Re-BAR); "
    "see NVIDIA/nccl issues 1999 and 2079 and vLLM issue 33041"
)

PAYLOAD = r'''
import json
import os
import sys
import tempfile
import time
import traceback

REPORT_KEY = "nccl_smoke"


def emit(report):
    report[REPORT_KEY] = 1
    sys.stdout.write(json.dumps(report, sort_keys=True) + "\n")
    sys.stdout.flush()


def pattern(torch, numel, rank, device):
    # Small integers: every sum of world_size of them is exact in float32, so the check is
    # exact equality, and an element moved or dropped shows up.
    return (torch.arange(numel, device=device, dtype=torch.int64) % 7 + rank + 1).to(torch.float32)


def worker(rank, world_size, store_path, out_dir, sizes, iterations, warmup):
    import datetime
    import torch
    import torch.distributed as dist

    result = {"rank": rank, "sizes": []}
    try:
        torch.cuda.set_device(rank)
        device = torch.device("cuda", rank)
        dist.init_process_group(
            "nccl", init_method="file://" + store_path, rank=rank, world_size=world_size,
            timeout=datetime.timedelta(seconds=600), device_id=device)
        for size in sizes:
            numel = size // 4
            data = pattern(torch, numel, rank, device)
            dist.all_reduce(data)
            base = torch.arange(numel, device=device, dtype=torch.int64) % 7
            expected = (base * world_size + world_size * (world_size + 1) // 2).to(torch.float32)
            mismatches = int((data != expected).sum().item())
            del data, expected, base
            work = pattern(torch, numel, 0, device)
            for _ in range(warmup):
                dist.all_reduce(work)
            torch.cuda.synchronize()
            start = torch.cuda.Event(enable_timing=True)
            stop = torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(iterations):
                dist.all_reduce(work)
            stop.record()
            torch.cuda.synchronize()
            seconds = start.elapsed_time(stop) / 1000.0 / iterations
            # The slowest rank sets the collective's time.
            slowest = torch.tensor([seconds], device=device, dtype=torch.float64)
            dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
            del work
            result["sizes"].append({
                "bytes": numel * 4, "mismatches": mismatches, "seconds": float(slowest.item())})
        dist.barrier()
        dist.destroy_process_group()
    except BaseException as exc:
        result["error"] = "%s: %s" % (type(exc).__name__, exc)
        result["traceback"] = traceback.format_exc()[-4000:]
    with open(os.path.join(out_dir, "rank%d.json" % rank), "w") as handle:
        json.dump(result, handle)


def main():
    options = json.loads(sys.argv[1])
    report = {"ok": False, "error": None, "world_size": 0, "results": []}
    started = time.time()
    try:
        import torch
        import torch.distributed as dist
        import torch.multiprocessing as mp
    except ImportError as exc:
        report["error"] = "torch is not importable: %s" % exc
        report["torch_missing"] = True
        emit(report)
        return 0
    report["torch"] = torch.__version__
    report["cuda"] = torch.version.cuda
    try:
        report["nccl"] = ".".join(str(part) for part in torch.cuda.nccl.version())
    except Exception:
        report["nccl"] = None
    world_size = torch.cuda.device_count()
    report["world_size"] = world_size
    report["devices"] = [torch.cuda.get_device_name(i) for i in range(world_size)]
    report["environment"] = {k: v for k, v in sorted(os.environ.items()) if k.startswith("NCCL_")
                             or k.startswith("TORCH_SYMM_MEM") or k == "CUDA_VISIBLE_DEVICES"}
    if world_size < 1 or not dist.is_nccl_available():
        report["error"] = "no CUDA device or no NCCL in this torch build"
        emit(report)
        return 0
    work_dir = tempfile.mkdtemp(prefix="nccl-smoke-")
    try:
        store_path = os.path.join(work_dir, "store")
        mp.spawn(worker, nprocs=world_size, join=True,
                 args=(world_size, store_path, work_dir, options["sizes"],
                       options["iterations"], options["warmup"]))
        ranks = []
        for rank in range(world_size):
            with open(os.path.join(work_dir, "rank%d.json" % rank)) as handle:
                ranks.append(json.load(handle))
    except Exception as exc:
        report["error"] = "%s: %s" % (type(exc).__name__, exc)
        emit(report)
        return 0
    finally:
        for name in os.listdir(work_dir):
            os.unlink(os.path.join(work_dir, name))
        os.rmdir(work_dir)
    errors = ["rank %d: %s" % (r["rank"], r["error"]) for r in ranks if r.get("error")]
    if errors:
        report["error"] = "; ".join(errors)
        report["tracebacks"] = [r["traceback"] for r in ranks if r.get("traceback")]
        emit(report)
        return 0
    factor = 2.0 * (world_size - 1) / world_size
    for index, size in enumerate(ranks[0]["sizes"]):
        seconds = size["seconds"]
        algbw = size["bytes"] / seconds / 1e9 if seconds > 0 else 0.0
        report["results"].append({
            "bytes": size["bytes"],
            "dtype": "float32",
            "iterations": options["iterations"],
            "time_us": round(seconds * 1e6, 3),
            "algbw_gbps": round(algbw, 3),
            "busbw_gbps": round(algbw * factor, 3),
            "mismatches": sum(r["sizes"][index]["mismatches"] for r in ranks),
        })
    bad = [r["bytes"] for r in report["results"] if r["mismatches"]]
    if bad:
        report["error"] = "wrong sums at %s bytes" % ", ".join(str(b) for b in bad)
    report["ok"] = not bad
    report["seconds"] = round(time.time() - started, 3)
    emit(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
'''


class SmokeError(Exception):
    """A report that cannot be read as the payload's report."""


def parse_report(stdout):
    """Return the payload's report from its stdout: the last line that is a JSON object
    carrying REPORT_KEY. Raises SmokeError when there is none or it lacks a field."""
    report = None
    for line in (stdout or "").splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict) and REPORT_KEY in data:
            report = data
    if report is None:
        raise SmokeError("the smoke test printed no report")
    if report[REPORT_KEY] != REPORT_VERSION:
        raise SmokeError("report version %r, expected %d" % (report[REPORT_KEY], REPORT_VERSION))
    for key, kind in (("ok", bool), ("world_size", int), ("results", list)):
        if not isinstance(report.get(key), kind):
            raise SmokeError("the report has no %s field of type %s" % (key, kind.__name__))
    for entry in report["results"]:
        for key in ("bytes", "time_us", "algbw_gbps", "busbw_gbps", "mismatches"):
            if not isinstance(entry.get(key), (int, float)) or isinstance(entry.get(key), bool):
                raise SmokeError("a result has no numeric %s field" % key)
    return report


def summarize(report):
    """The figures kept as facts: the bus bandwidth at the largest size, and at every size."""
    results = sorted(report["results"], key=lambda entry: entry["bytes"])
    largest = results[-1] if results else None
    return {
        "ok": report["ok"],
        "world_size": report["world_size"],
        "torch": report.get("torch"),
        "nccl": report.get("nccl"),
        "busbw_gbps": largest["busbw_gbps"] if largest else None,
        "busbw_bytes": largest["bytes"] if largest else None,
        "by_size": dict((str(entry["bytes"]), entry["busbw_gbps"]) for entry in results),
    }


# NCCL before 2.31.2 fails collectives of 512 KiB and more with an illegal memory access on
# RTX PRO 6000 Blackwell GPUs (compute capability 12) talking over PCIe: reported for 2.26.2 and
# not reproducible with 2.31.2 (NVIDIA/nccl#2418).
NCCL_FIXED_FOR_CC12 = (2, 31, 2)


def version_finding(version, capability_majors):
    """What is wrong with the NCCL VERSION the smoke test reported on GPUs of these compute
    capability majors, in words naming the remedy; None when nothing is."""
    if not version or 12 not in [int(major) for major in capability_majors or []]:
        return None
    parts = tuple(int(part) for part in re.findall(r"\d+", str(version))[:3])
    if not parts or parts >= NCCL_FIXED_FOR_CC12:
        return None
    return ("NCCL %s, which the release's torch loads, is older than 2.31.2, and NCCL before 2.31.2 fails collectives "
            "of 512 KiB and more on compute capability 12 GPUs with an illegal memory access (NVIDIA/nccl#2418); "
            "torch pins its nvidia-nccl-cu13 exactly, so the remedy is NCCL 2.31.2 or newer in the release: "
            "sglang_install's NCCL floor (sglang_install_nccl_floor_policy) lifts that pin with the uv installer, and an "
            "install without dependencies (sglang_install_no_deps) lists nvidia-nccl-cu13>=2.31.2 in "
            "sglang_install_extra_packages or the lock" % version)


def note(report):
    """The drift report's note on a host's last smoke test (the fact sglang_service_nccl_smoke_report:
    ran, passed, msg, busbw_gbps, world_size), or None when it measured nothing (no torch)."""
    if not isinstance(report, dict) or not (report.get("ran") or report.get("passed") is False):
        return None
    if report.get("passed"):
        if report.get("busbw_gbps") is None:
            return "passed"
        return "passed: %s GB/s bus bandwidth over %s GPUs" % (report["busbw_gbps"], report.get("world_size") or "?")
    # The failure itself, without the likely causes the module's message appends.
    return "FAILED: %s" % (str(report.get("msg") or "no reason recorded").split(". Likely causes: ", maxsplit=1)[0])


def failure_message(report=None, timed_out=False, timeout=None, rc=None, stderr=None):
    """The reason a run failed, in words, or None when it passed."""
    if timed_out:
        return ("the NCCL all-reduce did not finish within %s s and was killed (a hang)"
                % timeout)
    if report is None:
        tail = (stderr or "").strip().splitlines()[-3:]
        return "the smoke test exited with status %s and printed no report%s" % (
            rc, (": " + " | ".join(tail)) if tail else "")
    if report["ok"]:
        return None
    return "the NCCL all-reduce failed: %s" % (report.get("error") or "no result")


def run(python, sizes_kib, iterations=20, warmup=5, timeout=DEFAULT_TIMEOUT, environment=None, sandbox=None):
    """Run the payload with PYTHON under a hard TIMEOUT, and return a dict:
    rc, stdout, stderr, timed_out, seconds. On timeout the payload's whole process group
    (its spawned ranks included) is killed. With SANDBOX (user, group, properties) it runs as
    that account in a transient systemd service with those properties, never as the caller:
    a release's code (its site-packages, any .pth file there) runs only inside the sandbox."""
    extra = dict((str(k), str(v)) for k, v in (environment or {}).items())
    extra["PYTHONUNBUFFERED"] = "1"
    options = {
        "sizes": [int(kib) * 1024 for kib in sizes_kib],
        "iterations": int(iterations),
        "warmup": int(warmup),
    }
    # The payload file must be readable by the sandbox's account; its run writes only to the
    # private /tmp of its unit (the payload's own temporary directory).
    work_dir = tempfile.mkdtemp(prefix="nccl-smoke-run-", dir="/run" if sandbox else None)
    script = os.path.join(work_dir, "nccl_smoke_payload.py")
    with open(script, "w") as handle:
        handle.write(PAYLOAD)
    unit = None
    if sandbox:
        os.chmod(work_dir, 0o755)
        os.chmod(script, 0o644)
    started = time.time()
    if os.sep in python:
        python = os.path.abspath(python)
    argv = [python, script, json.dumps(options)]
    env = dict(os.environ, **extra)
    if sandbox:
        unit = sandbox_run.unit_name("nccl-smoke")
        argv = sandbox_run.argv(unit, sandbox, extra, argv, timeout)
        env = dict(os.environ)
    try:
        # A session of its own, so the group holds the payload and every rank it spawns, and the
        # whole group can be killed at the timeout: run_command has neither.
        proc = subprocess.Popen(  # pylint: disable=ansible-bad-function
            argv, cwd=work_dir, env=env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    except OSError as exc:
        shutil.rmtree(work_dir, ignore_errors=True)
        return {"rc": None, "stdout": "", "stderr": "cannot run %s: %s" % (argv[0], exc.strerror),
                "timed_out": False, "seconds": 0.0}
    timed_out = False
    try:
        stdout, stderr = proc.communicate(timeout=timeout + (10 if sandbox else 0))
    except subprocess.TimeoutExpired:
        timed_out = True
        if unit:
            subprocess.call(["systemctl", "kill", "--signal=SIGKILL", unit],  # pylint: disable=ansible-bad-function
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        stdout, stderr = proc.communicate()
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
    if sandbox and not timed_out and time.time() - started >= timeout:
        # systemd stopped it at RuntimeMaxSec.
        timed_out = True
    return {
        "rc": proc.returncode,
        "stdout": stdout.decode("utf-8", "replace"),
        "stderr": stderr.decode("utf-8", "replace"),
        "timed_out": timed_out,
        "seconds": round(time.time() - started, 3),
    }
