"""The NCCL smoke test's runner on this machine, which has no GPU and no torch.

What can be real here is: the payload itself, run by the test venv's python (no torch, so it
reports torch_missing), and the hard timeout killing a whole process tree. The stand-in below
is a shell script in the place of a python whose all-reduce hangs: it starts a child, as
torch.multiprocessing starts one rank per GPU, and both sleep.
"""
from __future__ import annotations

import os
import sys
import time

from ansible_collections.blackwell.sglang.plugins.module_utils import nccl

HANGING_PYTHON = """#!/bin/sh
sleep 300 &
echo $! > "$CHILD_PID_FILE"
sleep 300
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A killed child that nobody reaped yet is a zombie: dead for this purpose.
    with open(f"/proc/{pid}/stat") as handle:
        return handle.read().split(")")[-1].split()[0] != "Z"


def test_payload_without_torch_reports_torch_missing():
    outcome = nccl.run(sys.executable, [64], timeout=30)
    assert outcome["rc"] == 0
    assert not outcome["timed_out"]
    report = nccl.parse_report(outcome["stdout"])
    assert report["torch_missing"] is True
    assert report["ok"] is False
    assert report["error"] == "torch is not importable: No module named 'torch'"
    assert report["results"] == []


def test_timeout_kills_the_whole_process_group(tmp_path):
    python = tmp_path / "python"
    python.write_text(HANGING_PYTHON)
    python.chmod(0o755)
    pid_file = tmp_path / "child.pid"
    started = time.monotonic()
    outcome = nccl.run(str(python), [64], timeout=2, environment={"CHILD_PID_FILE": str(pid_file)})
    assert outcome["timed_out"] is True
    assert time.monotonic() - started < 10
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(child), "the payload's child survived the timeout"
    message = nccl.failure_message(None, timed_out=True, timeout=2)
    assert message == "the NCCL all-reduce did not finish within 2 s and was killed (a hang)"


def test_a_python_that_does_not_exist_is_a_failure_not_a_crash(tmp_path):
    outcome = nccl.run(str(tmp_path / "missing" / "python"), [64])
    assert outcome["rc"] is None
    assert nccl.failure_message(None, rc=outcome["rc"], stderr=outcome["stderr"]) == (
        "the smoke test exited with status None and printed no report: cannot run "
        f"{tmp_path}/missing/python: No such file or directory"
    )


def test_the_payload_runs_with_the_sizes_asked_for(tmp_path):
    # A stand-in python that prints its arguments shows what the payload is told.
    python = tmp_path / "python"
    python.write_text('#!/bin/sh\nprintf \'%s\\n\' "$2"\n')
    python.chmod(0o755)
    outcome = nccl.run(str(python), [64, 262144], iterations=7, warmup=2)
    assert outcome["stdout"] == '{"sizes": [65536, 268435456], "iterations": 7, "warmup": 2}\n'


def test_with_a_sandbox_the_payload_runs_as_the_account_in_a_transient_unit(monkeypatch):
    """systemd-run, not the python, is what the runner starts: as the account, with the sandbox's
    properties and the environment on its command line, systemd's own timeout, and the payload
    where the account can read it. (The lab runs it for real: molecule/sglang_service.)"""
    seen = {}

    class Started:
        pid = returncode = 0

        def __init__(self, argv, **kwargs):
            seen["argv"], seen["cwd"] = argv, kwargs["cwd"]
            seen["script_mode"] = oct(os.stat(argv[-2]).st_mode & 0o777)
            seen["dir_mode"] = oct(os.stat(kwargs["cwd"]).st_mode & 0o777)

        def communicate(self, timeout=None):
            seen["timeout"] = timeout
            return b"", b""

    monkeypatch.setattr(nccl.subprocess, "Popen", Started)
    made = nccl.tempfile.mkdtemp
    # /run is the node's: here the same directory is made under the test's own temporary root.
    monkeypatch.setattr(nccl.tempfile, "mkdtemp", lambda prefix, dir=None: made(prefix=prefix))
    sandbox = {"user": "sglang", "group": "sglang", "properties": ["NoNewPrivileges=yes", "ProtectSystem=strict"]}
    nccl.run("/opt/sglang/current/bin/python", [64], timeout=30, environment={"NCCL_DEBUG": "WARN"}, sandbox=sandbox)
    argv = seen["argv"]
    assert argv[:6] == ["systemd-run", "--quiet", "--wait", "--pipe", "--collect", "--service-type=exec"]
    assert argv[6].startswith("--unit=blackwell-sglang-nccl-smoke-") and argv[6].endswith(".service")
    assert argv[7:14] == ["--property=User=sglang", "--property=Group=sglang", "--property=RuntimeMaxSec=30",
                          "--property=NoNewPrivileges=yes", "--property=ProtectSystem=strict",
                          "--setenv=NCCL_DEBUG=WARN", "--setenv=PYTHONUNBUFFERED=1"]
    assert argv[14:16] == ["--", "/opt/sglang/current/bin/python"]
    assert argv[16].endswith("/nccl_smoke_payload.py")
    assert (seen["script_mode"], seen["dir_mode"]) == ("0o644", "0o755")
    assert seen["timeout"] > 30
