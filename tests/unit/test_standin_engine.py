"""The lab's stand-in engine (tests/lab/sglang_standin/, a test double, not SGLang): it answers
/metrics with Prometheus text when started with --enable-metrics, without the key as SGLang does,
and 404 without the flag; on SIGTERM it leaves no process behind (its spawned child and
multiprocessing's resource tracker end before it does), which is what lets systemd in the lab's
containers stop it without waiting out TimeoutStopSec; and it stops gracefully as SGLang does, a
request in flight answered before it exits, the health paths 503 meanwhile, and serves /ready
where the release declares that route. Run on loopback from a venv that holds a bare ``sglang``
package."""
from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
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


# The route as a release that serves it declares it (SGLang 0.5.23's http_server.py, in short).
READY_ROUTE = '@app.get("/ready")\nasync def ready() -> Response:\n    ...\n'


@pytest.fixture
def standin(tmp_path):
    """Starts the stand-in with the given extra arguments; stops every one it started. A config
    written to tmp_path/config.json first is the one it reads; tmp_path/site/sglang is the
    release it stands beside."""
    package = tmp_path / "site"
    (package / "sglang" / "srt" / "entrypoints").mkdir(parents=True)
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


def _post(port, results):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("POST", "/generate", body=json.dumps({"text": "hi"}),
                 headers={"Authorization": "Bearer k", "Content-Type": "application/json"})
    response = conn.getresponse()
    results.append((response.status, json.loads(response.read())["text"]))


def test_ready_only_where_the_release_declares_it(standin, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"health_delay": 0.0}))
    port, _proc = standin()
    assert _get(port, "/ready")[0] == 404
    (tmp_path / "site" / "sglang" / "srt" / "entrypoints" / "http_server.py").write_text(READY_ROUTE)
    port, _proc = standin()
    assert _get(port, "/ready")[0] == 200


def test_sigterm_finishes_the_request_in_flight_then_exits(standin, tmp_path):
    (tmp_path / "site" / "sglang" / "srt" / "entrypoints" / "http_server.py").write_text(READY_ROUTE)
    (tmp_path / "config.json").write_text(json.dumps({"health_delay": 0.0, "reply_delay": 2.0}))
    port, proc = standin()
    results = []
    client = threading.Thread(target=_post, args=(port, results))
    client.start()
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    # Stopping: not ready, not healthy, still running what it holds.
    assert (_get(port, "/ready")[0], _get(port, "/health")[0]) == (503, 503)
    assert proc.poll() is None
    client.join(timeout=10)
    assert results == [(200, "blackwell")]
    assert proc.wait(timeout=10) == 0


def test_an_abrupt_stop_drops_the_request_in_flight(standin, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"health_delay": 0.0, "reply_delay": 2.0, "stop": "abrupt"}))
    port, proc = standin()
    results = []
    client = threading.Thread(target=lambda: _try_post(port, results))
    client.start()
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 0
    client.join(timeout=10)
    assert results == ["dropped"], results


def _try_post(port, results):
    try:
        _post(port, results)
    except (OSError, http.client.HTTPException):
        results.append("dropped")
