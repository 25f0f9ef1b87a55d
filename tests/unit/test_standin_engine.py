"""The lab's stand-in engine (tests/lab/sglang_standin/, a test double, not SGLang): it answers
/metrics with Prometheus text when started with --enable-metrics, without the key as SGLang does,
and 404 without the flag; on SIGTERM it leaves no process behind (its spawned child and
multiprocessing's resource tracker end before it does), which is what lets systemd in the lab's
containers stop it without waiting out TimeoutStopSec. Run on loopback from a venv that holds a
bare ``sglang`` package."""
from __future__ import annotations

import http.client
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from conftest import ROOT

START = ("import runpy, sglang_standin; sglang_standin.install(); "
         "runpy.run_module('sglang.launch_server', run_name='__main__')")


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _get(port, path, headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    conn.request("GET", path, headers=headers or {})
    response = conn.getresponse()
    return response.status, response.getheader("Content-Type"), response.read().decode()


@pytest.fixture
def standin(tmp_path):
    """Starts the stand-in with the given extra arguments; stops every one it started."""
    package = tmp_path / "site"
    (package / "sglang").mkdir(parents=True)
    (package / "sglang" / "__init__.py").write_text("")
    (package / "sglang-0.5.8.dist-info").mkdir()
    (package / "sglang-0.5.8.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: sglang\nVersion: 0.5.8\n")
    (tmp_path / "records").mkdir()
    env = dict(os.environ, PYTHONPATH=f"{ROOT / 'tests' / 'lab'}{os.pathsep}{package}",
               SGLANG_STANDIN_CONFIG=str(tmp_path / "config.json"), SGLANG_STANDIN_RECORDS=str(tmp_path / "records"),
               CUDA_HOME=str(tmp_path / "no-cuda"))
    started = []

    def start(*extra):
        port = _free_port()
        # A session of its own, as systemd gives a unit a cgroup of its own: what is left of it
        # after the main process exits can be found.
        proc = subprocess.Popen([sys.executable, "-c", START, "--model-path", "/models/m", "--served-model-name", "qwen",
                                 "--host", "127.0.0.1", "--port", str(port), "--api-key", "k", *extra],
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        started.append(proc)
        for _attempt in range(100):
            try:
                _get(port, "/health")
                return port, proc
            except OSError:
                time.sleep(0.1)
        raise AssertionError("the stand-in did not start")

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=10)
        for pid in _session(proc.pid):
            os.kill(pid, signal.SIGKILL)


def _session(sid):
    """The PIDs of the processes still in session sid."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[3]) == sid:  # after the command: state, ppid, pgrp, session
            found.append(int(entry))
    return found


def test_metrics_with_the_flag_without_the_key(standin):
    port, _proc = standin("--enable-metrics")
    status, kind, body = _get(port, "/metrics")
    assert (status, kind) == (200, "text/plain; version=0.0.4; charset=utf-8")
    assert 'sglang:num_running_reqs{model_name="qwen"} 0\n' in body
    assert "# TYPE sglang:num_requests_total counter\n" in body
    # Other paths still want the key.
    assert _get(port, "/get_load")[0] == 401


def test_no_metrics_without_the_flag(standin):
    port, _proc = standin()
    assert _get(port, "/metrics")[0] == 404


def test_sigterm_leaves_no_process_behind(standin):
    port, proc = standin()
    # The spawned child (the scheduler's imitation) and the resource tracker run beside it.
    for _attempt in range(100):
        if len(_session(proc.pid)) >= 3:
            break
        time.sleep(0.1)
    assert len(_session(proc.pid)) >= 3, _session(proc.pid)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 0
    # Read at once: whatever is still there now would be left for systemd's final SIGKILL.
    assert _session(proc.pid) == []
    with pytest.raises(OSError):
        _get(port, "/health")
