"""Lab stand-in for ``python -m sglang.launch_server``: NOT the inference engine.

Records how systemd started it (argv, environment, user, the CUDA release nvcc under CUDA_HOME
reports, as a JIT compile at start-up would find it) as one JSON line in
/var/lib/sglang-standin/launches.jsonl, then serves ``/health`` and ``/health_generate`` on the
``--host``/``--port`` it was given, answering 503 until a start-up delay has passed and 200
afterwards, like an engine that loads its model, and ``/ready`` the same way where the release
installed beside it serves that route (its http_server.py declares it: 0.5.23 does, 0.5.18 not).
The first 200 of these is recorded in healthy.jsonl, with the path asked.

Told what to do by /etc/sglang-standin/config.json (the unit stays exactly the production
one):  {"health_delay": 1.0, "mode": "serve" | "unhealthy" | "exit",
        "refuse_versions": [...], "refuse_args": [...], "refuse_cuda": [...], "reply_delay": 0.0,
        "stop": "graceful" | "abrupt"}
  serve      healthy after health_delay seconds (default)
  unhealthy  keeps answering 503, like an engine that never finishes loading
  exit       exits with status 1 right after recording, like an engine that crashes
A release whose SGLang version is in refuse_versions, a launch with an argument in refuse_args,
or a CUDA release (13.5) in refuse_cuda, exits as in mode exit: an upgrade, a unit change or a
toolkit the engine cannot run on.

Once healthy it also answers ``/generate`` and ``/v1/chat/completions`` (with the API key the
launcher handed it, when there is one) with the fixed reply "blackwell" after reply_delay seconds,
and the calls SGLang's router makes on a worker (/get_server_info, /get_model_info, /get_load
with the requests in flight), and /v1/loads?include=core as SGLang 0.5.8 to 0.5.23 do. A SIGTERM
starts a graceful stop, as SGLang's own (its tokenizer manager's SIGTERM handler, 0.5.8 to
0.5.23): from then on the health paths and /ready answer 503, requests are still taken, and the
stand-in exits once it holds none (SGLang counts them every 5 s; the stand-in at once, so that a
lab restart takes no longer than it must). A SIGKILL drops what is in flight, and so does a
SIGTERM with "stop": "abrupt" in the config: an engine that dies on its way down, which only the
router's drain protects the requests from. The stand-in ends
its spawned child and multiprocessing's resource tracker before it exits, so that nothing of it
is left for systemd's final SIGKILL: in the lab's containers (cgroup v1 hybrid) systemd does not
see a cgroup emptied by that SIGKILL and waited out TimeoutStopSec (120 s) on every stop.

Started with --enable-metrics it answers ``/metrics`` with a few Prometheus text series named as
SGLang names its own (requests running and waiting, requests served), without asking for the
key, as SGLang does; without the flag ``/metrics`` is 404. The numbers are the stand-in's, not
an engine's measurements.

Before it serves, it imitates the engine's start-up logging (engine_logging.py): the launch
arguments, the API key included, logged at INFO in this process and in one spawned child.
"""
import http.server
import importlib.metadata
import json
import os
import pwd
import re
import signal
import subprocess
import sys
import threading
import time

from sglang_standin import engine_logging

# The lab's nodes use these paths; the unit tests run the stand-in on the test machine elsewhere.
CONFIG = os.environ.get("SGLANG_STANDIN_CONFIG", "/etc/sglang-standin/config.json")
RECORDS = os.environ.get("SGLANG_STANDIN_RECORDS", "/var/lib/sglang-standin")


def _option(argv, name, default):
    for index, word in enumerate(argv):
        if word == name and index + 1 < len(argv):
            return argv[index + 1]
        if word.startswith(name + "="):
            return word.split("=", 1)[1]
    return default


def _cuda_release():
    """What the real nvcc under CUDA_HOME reports ("13.0"), as a JIT build would run it; '' without one."""
    nvcc = os.path.join(os.environ.get("CUDA_HOME", "/nonexistent"), "bin", "nvcc")
    try:
        banner = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    found = re.search(r"release ([0-9]+\.[0-9]+),", banner)
    return found.group(1) if found else ""


def _append(name, record):
    path = os.path.join(RECORDS, name)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    with os.fdopen(fd, "a") as handle:
        handle.write(json.dumps(record, sort_keys=True) + "\n")


def _serves_ready(package_dirs):
    """Whether the installed release's HTTP server declares GET /ready (read, never imported)."""
    for folder in package_dirs:
        try:
            with open(os.path.join(folder, "srt", "entrypoints", "http_server.py"), encoding="utf-8") as handle:
                return re.search(r"""^@app\.get\(\s*["']/ready["']""", handle.read(), re.MULTILINE) is not None
        except OSError:
            continue
    return False


def main():
    argv = sys.argv[1:]
    try:
        with open(CONFIG) as handle:
            config = json.load(handle)
    except FileNotFoundError:
        config = {}
    mode = config.get("mode", "serve")
    version = importlib.metadata.version("sglang")
    refused = [word for word in argv if word in config.get("refuse_args", [])]
    cuda = _cuda_release()
    cuda_refused = bool(cuda) and cuda in config.get("refuse_cuda", [])
    if version in config.get("refuse_versions", []) or refused or cuda_refused:
        mode = "refused"
    delay = float(config.get("health_delay", 1.0))
    started = time.time()
    _append("launches.jsonl", {
        "time": started,
        "pid": os.getpid(),
        "argv": argv,
        "environ": dict(os.environ),
        "user": pwd.getpwuid(os.getuid()).pw_name,
        "python": sys.executable,
        "sglang_path": list(sys.modules["sglang"].__path__),
        "sglang_version": version,
        "cuda": cuda,
        "mode": mode,
    })
    if mode == "exit":
        print("sglang stand-in: told to fail (mode exit)", file=sys.stderr)
        sys.exit(1)
    if mode == "refused":
        what = ("the arguments %s" % " ".join(refused) if refused
                else "CUDA %s" % cuda if cuda_refused else "SGLang %s" % version)
        print("sglang stand-in: refuses %s (config)" % what, file=sys.stderr)
        sys.exit(1)

    scheduler = engine_logging.log_startup(argv)
    healthy_recorded = threading.Event()
    key = _option(argv, "--api-key", "")
    model = _option(argv, "--served-model-name", "") or _option(argv, "--model-path", "")
    reply_delay = float(config.get("reply_delay", 0.0))
    metrics = "--enable-metrics" in argv
    in_flight = [0]
    served = [0]
    lock = threading.Lock()
    stopping = threading.Event()
    health_paths = ("/health", "/health_generate") + (("/ready",) if _serves_ready(sys.modules["sglang"].__path__) else ())

    def _metrics_text():
        label = '{model_name="%s"}' % model.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        return ("# HELP sglang:num_running_reqs The number of running requests.\n"
                "# TYPE sglang:num_running_reqs gauge\n"
                "sglang:num_running_reqs%s %d\n"
                "# HELP sglang:num_queue_reqs The number of requests in the waiting queue.\n"
                "# TYPE sglang:num_queue_reqs gauge\n"
                "sglang:num_queue_reqs%s 0\n"
                "# HELP sglang:num_requests_total The number of requests served.\n"
                "# TYPE sglang:num_requests_total counter\n"
                "sglang:num_requests_total%s %d\n" % (label, in_flight[0], label, label, served[0]))

    class Handler(http.server.BaseHTTPRequestHandler):
        def _answer(self, status, payload):
            body = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _ready(self):
            return mode == "serve" and time.time() - started >= delay

        def do_GET(self):
            # What SGLang's router asks a worker when it registers it and while it watches it.
            info = {"/get_server_info": {"version": version, "served_model_name": model},
                    "/server_info": {"version": version, "served_model_name": model},
                    "/get_model_info": {"model_path": model, "is_generation": True},
                    "/model_info": {"model_path": model, "is_generation": True},
                    "/v1/models": {"object": "list", "data": [{"id": model, "object": "model"}]},
                    "/get_load": [{"dp_rank": 0, "num_reqs": in_flight[0], "num_waiting_reqs": 0}],
                    "/v1/loads?include=core": {"loads": [{"dp_rank": 0, "num_running_reqs": in_flight[0],
                                                          "num_waiting_reqs": 0}]}}
            if self.path in info:
                if key and self.headers.get("Authorization", "") != "Bearer " + key:
                    self._answer(401, {"error": "unauthorized"})
                    return
                self._answer(200, info[self.path])
                return
            if self.path == "/metrics" and metrics:
                body = _metrics_text().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            if self.path not in health_paths:
                self.send_error(404)
                return
            ready = self._ready() and not stopping.is_set()
            if ready and not healthy_recorded.is_set():
                healthy_recorded.set()
                _append("healthy.jsonl", {"time": time.time(), "pid": os.getpid(), "path": self.path})
            self._answer(200 if ready else 503, {} if ready else {"status": "loading"})

        def do_POST(self):
            """A short, deterministic reply after reply_delay seconds: NOT a model's output."""
            if self.path not in ("/generate", "/v1/chat/completions"):
                self.send_error(404)
                return
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if key and self.headers.get("Authorization", "") != "Bearer " + key:
                self._answer(401, {"error": "unauthorized"})
                return
            if not self._ready():
                self._answer(503, {"error": "loading"})
                return
            with lock:
                in_flight[0] += 1
            try:
                time.sleep(reply_delay)
            finally:
                with lock:
                    in_flight[0] -= 1
                    served[0] += 1
            if self.path == "/generate":
                self._answer(200, {"text": "blackwell", "meta_info": {"finish_reason": {"type": "stop"}}})
            else:
                self._answer(200, {"object": "chat.completion", "model": model, "choices": [{
                    "index": 0, "message": {"role": "assistant", "content": "blackwell"}, "finish_reason": "stop"}]})

        def log_message(self, fmt, *args):
            sys.stderr.write("sglang stand-in: " + (fmt % args) + "\n")

    server = http.server.ThreadingHTTPServer(
        (_option(argv, "--host", "127.0.0.1"), int(_option(argv, "--port", "30000"))), Handler
    )

    def drain_then_stop():
        while True:
            with lock:
                if in_flight[0] == 0:
                    break
            time.sleep(0.05)
        server.shutdown()

    abrupt = config.get("stop", "graceful") == "abrupt"

    def graceful_stop(*_):
        if not stopping.is_set():
            stopping.set()
            threading.Thread(target=server.shutdown if abrupt else drain_then_stop, daemon=True).start()

    signal.signal(signal.SIGTERM, graceful_stop)
    print("sglang stand-in: serving on %s:%s (mode %s)" % (server.server_address + (mode,)), flush=True)
    server.serve_forever()
    engine_logging.stop(scheduler)


if __name__ == "__main__":
    main()
