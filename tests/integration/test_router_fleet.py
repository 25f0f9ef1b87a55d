"""One endpoint for the fleet: SGLang's real router (smg 1.13.0, the Shepherd Model Gateway, from
the lab wheelhouse) on a node of its own in front of three engine nodes, all converged by site.yml
over SSH.

tools/lab/lab.sh brings up four lab nodes without converging them; the test puts node 1 in the
group sglang_router and leaves nodes 2 to 4 in sglang_nodes. The engines are the lab's stand-in
(tests/lab/sglang_standin: NOT the engine), which answers /generate and /v1/chat/completions with
the fixed reply "blackwell" after a delay, behind the real unit, on an address the router reaches
(the containers' own addresses), with an API key. Then:
- site.yml converges the fleet (engines first, then the router, gated on /readiness), a second
  converge changes nothing, and the drift report finds every node clean;
- the fleet's Prometheus targets file lists each engine (model, release, GPU labels) and the
  router, and each target answers /metrics;
- the router routes: a request through it gets the engines' reply, and none without the key;
- a router node running sglang-router 0.3.2 (the router's last release under its old name, laid
  out as the collection deployed it) moves to smg in one converge under load: smg takes the same
  endpoint and unit, the old release goes, and the requests that failed meanwhile are counted;
- a worker taken out of the router by hand and a stray one put in are drift on the router's host
  (and the first on its engine's), with the router's view of each worker among the notes; a
  converge mends both and a check is clean again;
- under a bounded load of concurrent requests through the router, an upgrade of every engine
  (0.5.8 to 0.5.18, one node per batch) drains each node before its restart and puts it back
  after its gate: every request gets a 200 with the right reply, and the router's own metrics
  count as many requests and no failed answer from an engine;
- the same upgrade back on one node without draining drops requests, and the router's metrics
  count the failed answers;
- requests an engine is answering when its unit restarts (sent to it directly) all get their
  answer: the engine stops gracefully on SIGTERM, as SGLang does, and the restart waits for them;
- a file of the router's release changed on its node is drift there alone, named from pip's
  RECORD, and a converge installs the release again and restarts the router onto it;
- a router found stopped is started and passes its health gate before its workers are read,
  and every engine is back among them;
- a node the router had dropped, its engine down, restarts without a wait for requests it
  cannot hold, and goes back into the router after its gate;
- the router's unit is sandboxed at least as tightly as the engine's (systemd-analyze security);
- a router that cannot be reached (one of two) stops a serving node's restart before anything
  changes; best-effort draining notes it, still drains the other router and restarts;
- a node whose rollback passed its gate goes back into the router;
- a router release the wheelhouse does not hold fails the router's host with what pip said,
  leaves no venv, and the router serves on;
- an engine removed alone (remove.yml limited to it) leaves the router before its server stops,
  and the router removed alone leaves nothing of its own on its host, a second removal changing
  nothing.
The router sends each request once (--disable-retries): with its retries on, the router sent every
request a restarting node refused or dropped to another node in this lab, draining or not (seen
with sglang-router 0.3.2). It routes turn by turn (round_robin), so every engine carries its share
of the load when it restarts. The engines serve the model as "qwen" (--served-model-name): smg
routes a request to the workers that serve the model it names, and answers 404 for another.
"""
from __future__ import annotations

import json
import re
import subprocess
import time

import pytest
import yaml

from conftest import ROOT, drift_report, in_container, lab_env, recap, running_lab

pytestmark = pytest.mark.lab

PREFIX = "router-fleet"
PORT_BASE = "2300"
PLAYBOOK = ROOT / "site.yml"
ROUTER = f"{PREFIX}-01"
ENGINES = [f"{PREFIX}-{i:02d}" for i in (2, 3, 4)]
KEY = "sk-router-lab-SECRET-key"
# The engines drop what they hold on SIGTERM ("stop": "abrupt"), unlike SGLang, which finishes it
# first: an engine's own graceful stop and the router's health checks together often spare an
# undrained restart its failures, so only an engine that dies on its way down shows what the
# drain alone protects. The in-flight test below stops one the way SGLang does.
STANDIN = '{"mode": "serve", "health_delay": 1.0, "reply_delay": 0.2, "stop": "abrupt"}'
# A bounded, self-stopping load on the router node: THREADS clients, each sending chat requests
# through the router one after another until /tmp/load.stop appears (or LIMIT seconds pass), each
# request's status, reply and latency recorded in /tmp/load.json.
LOAD = r"""
import json, os, threading, time, urllib.error, urllib.request
KEY, THREADS, LIMIT = %r, 4, 900
results, lock = [], threading.Lock()
def client():
    end = time.time() + LIMIT
    while time.time() < end and not os.path.exists("/tmp/load.stop"):
        body = json.dumps({"model": "qwen", "messages": [{"role": "user", "content": "hi"}]}).encode()
        request = urllib.request.Request("http://127.0.0.1:30100/v1/chat/completions", data=body, method="POST",
                                         headers={"Authorization": "Bearer " + KEY, "Content-Type": "application/json"})
        started = time.time()
        try:
            with urllib.request.urlopen(request, timeout=60) as answer:
                status, text = answer.status, answer.read().decode()
        except urllib.error.HTTPError as error:
            status, text = error.code, error.read().decode(errors="replace")
        except OSError as error:
            status, text = -1, str(error)
        try:
            reply = json.loads(text)["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            reply = None
        with lock:
            results.append({"status": status, "reply": reply, "at": started, "seconds": time.time() - started,
                            "text": text[:200]})
threads = [threading.Thread(target=client) for _ in range(THREADS)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
with open("/tmp/load.json.new", "w") as handle:
    json.dump(results, handle)
os.rename("/tmp/load.json.new", "/tmp/load.json")
""" % KEY


def address(name: str) -> str:
    return subprocess.run(["podman", "inspect", "-f", "{{.NetworkSettings.IPAddress}}", name], capture_output=True,
                          text=True, check=True).stdout.strip()


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    work = tmp_path_factory.mktemp("router")
    env = lab_env(work, PREFIX, PORT_BASE, 1 + len(ENGINES), LAB_CONVERGE="0")
    with running_lab(env):
        inventory = work / "inventory"
        hosts = yaml.safe_load((inventory / "hosts.yml").read_text())
        engines = hosts["all"]["children"]["sglang_nodes"]
        # The connection settings fleet.sh gives its group, for the router's group too.
        hosts["all"]["children"]["sglang_router"] = {"vars": engines["vars"],
                                                     "hosts": {ROUTER: engines["hosts"].pop(ROUTER)}}
        (inventory / "hosts.yml").write_text(yaml.safe_dump(hosts))
        # Host variables: they take precedence over the lab's group_vars/all.yml.
        settings = {
            "sglang_service_host": "0.0.0.0", "sglang_service_api_key": KEY,
            # The role's default (SGLang decides): 0.5.18 refuses the fusion flags on these GPUs.
            "sglang_service_flashinfer_fusion_enabled": False,
            "sglang_router_url": f"http://{address(ROUTER)}:30100",
            # The name clients ask for, which smg routes by.
            "sglang_service_served_model_name": "qwen",
            # The router notices a worker's health every 2 s, not every minute, and sends a request
            # once: with its retries on (the default), the router (sglang-router 0.3.2, as seen
            # before smg) sent every request a restarting node
            # refused or dropped to another node in this lab, so nothing showed whether the node
            # was drained or not. A streamed reply already under way cannot be retried either.
            "sglang_router_extra_args": ["--health-check-interval-secs", "2", "--disable-retries"],
            # Turn by turn: cache-aware routing (the default) sends one prompt to one worker, and
            # the load's prompts are all alike, so it stood on one engine and a restart of another
            # showed nothing (a run counted 0 failed of 2,720 without draining). Round robin puts
            # every engine under load when its turn to restart comes.
            "sglang_router_policy": "round_robin",
            # The router's metrics listen on loopback by default (they take no key); the lab's
            # Prometheus targets test scrapes them at the router's address, as a site exposes them.
            "sglang_router_metrics_host": "0.0.0.0",
            # The fleet's Prometheus targets, on the controller (playbooks/prometheus.yml).
            "sglang_prometheus_sd_path": str(work / "prometheus" / "targets.json")}
        (inventory / "host_vars").mkdir(exist_ok=True)
        for name in [ROUTER] + ENGINES:
            (inventory / "host_vars" / f"{name}.yml").write_text(yaml.safe_dump(
                dict(settings, sglang_router_worker_address=address(name),
                     sglang_prometheus_address=address(name))))
        for name in ENGINES:
            in_container(name, f"echo '{STANDIN}' >/etc/sglang-standin/config.json")
        yield {"env": env, "inventory": inventory, "work": work}


def converge(fleet, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["ansible-playbook", "-i", str(fleet["inventory"]), str(PLAYBOOK), *args],
                          cwd=ROOT, env={**fleet["env"], **(env or {})}, capture_output=True, text=True, check=False)


def through_router(path: str = "/v1/chat/completions", key: str | None = KEY) -> tuple[int, str]:
    header = f"'Authorization': 'Bearer {key}', " if key else ""
    script = ("import json, urllib.error, urllib.request as u\n"
              f"r = u.Request('http://127.0.0.1:30100{path}', data=json.dumps({{'model': 'qwen', 'messages': "
              "[{'role': 'user', 'content': 'hi'}]})"
              f".encode(), headers={{{header}'Content-Type': 'application/json'}}, method='POST')\n"
              "try:\n    a = u.urlopen(r, timeout=30); print(a.status, a.read().decode())\n"
              "except urllib.error.HTTPError as e:\n    print(e.code, e.read().decode())\n")
    status, _sep, body = in_container(ROUTER, f"python3 -c \"{script}\"").strip().partition(" ")
    return int(status), body


def test_the_fleet_converges_behind_its_router_and_a_second_converge_changes_nothing(fleet):
    first = converge(fleet, "-e", "sglang_rollout_serial=100%")
    assert first.returncode == 0, first.stdout[-20000:] + first.stderr[-3000:]
    second = converge(fleet, "-e", "sglang_rollout_serial=100%")
    assert second.returncode == 0, second.stdout[-20000:]
    counts = recap(second.stdout)
    assert sorted(counts) == sorted([ROUTER] + ENGINES), second.stdout[-3000:]
    assert {name: count["changed"] for name, count in counts.items()} == {name: 0 for name in counts}, \
        second.stdout[-20000:]
    assert KEY not in first.stdout + first.stderr + second.stdout + second.stderr
    code, report, output = drift_report(fleet["inventory"], PLAYBOOK, fleet["env"], fleet["work"] / "clean")
    assert code == 0, output
    assert {name: host["drift"] for name, host in report["hosts"].items()} == {
        name: [] for name in [ROUTER] + ENGINES}
    # The router's view of each worker, beside each host's verdict.
    urls = {name: f"http://{address(name)}:30000" for name in ENGINES}
    assert report["hosts"][ROUTER]["notes"]["router_workers"] == [f"{urls[name]}: healthy" for name in ENGINES], report
    for name in ENGINES:
        assert report["hosts"][name]["notes"]["router"] == [
            f"{urls[name]}: healthy (the router at http://{address(ROUTER)}:30100)"], report["hosts"][name]


def scrape(target: str) -> str:
    """GET /metrics of a target from the router's node, without a key, as Prometheus would."""
    return in_container(ROUTER, f"python3 -c \"import urllib.request as u; "
                                f"print(u.urlopen('http://{target}/metrics', timeout=10).read().decode())\"")


def test_prometheus_finds_every_engine_and_the_router_in_the_targets_file(fleet):
    targets = json.loads((fleet["work"] / "prometheus" / "targets.json").read_text())
    gpu = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
    assert targets == [{"targets": [f"{address(name)}:30000"],
                        "labels": {"job": "sglang", "instance": name, "model": "qwen", "release": "0.5.8",
                                   "gpu_model": gpu}} for name in ENGINES] + [
        {"targets": [f"{address(ROUTER)}:29000"], "labels": {"job": "sglang-router", "instance": ROUTER}}]
    # Each target answers as Prometheus would scrape it: the engines run with --enable-metrics.
    for entry in targets:
        text = scrape(entry["targets"][0])
        assert ("sglang:" if entry["labels"]["job"] == "sglang" else "smg_") in text, (entry, text[:500])


def test_requests_reach_the_engines_through_the_router_with_the_key_only(fleet):
    status, body = through_router()
    assert status == 200, body
    assert json.loads(body)["choices"][0]["message"]["content"] == "blackwell"
    status, _body = through_router(key=None)
    assert status == 401
    workers = json.loads(in_container(ROUTER, (
        f"python3 -c \"import urllib.request as u; print(u.urlopen(u.Request('http://127.0.0.1:30100/workers', "
        f"headers={{'Authorization': 'Bearer {KEY}'}})).read().decode())\"")))
    assert sorted((w["url"], w["is_healthy"]) for w in workers["workers"]) == sorted(
        (f"http://{address(name)}:30000", True) for name in ENGINES)
    # The key is in the router's secrets file only: neither its argv nor its unit holds it.
    assert KEY not in in_container(ROUTER, "cat /proc/$(systemctl show -p MainPID --value sglang-router)/cmdline; "
                                           "systemctl cat sglang-router; systemctl show sglang-router")
    assert in_container(ROUTER, "stat -c '%a %U' /etc/sglang-router/router.env").split() == ["600", "root"]


# The router node as the collection deployed it before smg: sglang-router 0.3.2 (the router's last
# release under that name, the real wheel from the lab wheelhouse) in /opt/sglang-router/0.3.2, the
# launcher importing sglang_router, the unit running that venv. Everything else (account, secrets,
# arguments, port) is what the role writes for smg too.
OLD_ROUTER = (
    "set -e; systemctl stop sglang-router; rm -rf /opt/sglang-router/1.13.0; "
    "python3 -m venv /opt/sglang-router/0.3.2; "
    "PIP_CONFIG_FILE=/etc/sglang-router/pip.conf /opt/sglang-router/0.3.2/bin/pip install --quiet "
    "--disable-pip-version-check sglang-router==0.3.2; "
    "sed -i 's/^from smg.launch_router /from sglang_router.launch_router /' "
    "/usr/local/lib/sglang-router/sglang_router_launch.py; "
    "sed -i 's#/opt/sglang-router/1.13.0/#/opt/sglang-router/0.3.2/#' /etc/systemd/system/sglang-router.service; "
    "systemctl daemon-reload; systemctl start sglang-router; "
    # Until it serves: /readiness answers 200 once a worker is healthy.
    "for i in $(seq 60); do python3 -c \"import urllib.request as u; u.urlopen('http://127.0.0.1:30100/readiness', "
    "timeout=2)\" 2>/dev/null && exit 0; sleep 1; done; exit 1")


# The title each release's launcher gives the router's process (setproctitle).
TITLES = {"0.3.2": "sglang::router", "1.13.0": "smg::router"}


def router_runs(release: str) -> bool:
    """Whether the router's process is the release's: systemd started it from the release's venv,
    and the process carries that release's title."""
    command = in_container(ROUTER, "systemctl show -p ExecStart --value sglang-router; "
                                   "tr '\\0' ' ' </proc/$(systemctl show -p MainPID --value sglang-router)/cmdline")
    return f"path=/opt/sglang-router/{release}/bin/python ;" in command and TITLES[release] in command.splitlines()[-1]


def test_a_router_on_sglang_router_0_3_2_moves_to_smg_in_one_converge_under_load(fleet):
    in_container(ROUTER, OLD_ROUTER)
    # Serving: the launcher titled the process as the router started.
    assert all_workers_healthy() == sorted((f"http://{address(name)}:30000", True) for name in ENGINES)
    assert router_runs("0.3.2")
    assert through_router()[0] == 200
    # The converge finds the old release and launcher: it installs smg beside it, rewrites the
    # launcher and the unit, restarts the router behind its gate and removes 0.3.2.
    run, results, _counted = under_load(fleet, "-e", "sglang_rollout_serial=100%")
    assert run.returncode == 0, run.stdout[-20000:]
    assert KEY not in run.stdout + run.stderr
    changed = {name: count["changed"] for name, count in recap(run.stdout).items()}
    assert changed[ROUTER] > 0 and {name: changed[name] for name in ENGINES} == {name: 0 for name in ENGINES}, changed
    assert router_runs("1.13.0")
    assert in_container(ROUTER, "ls /opt/sglang-router").split() == ["1.13.0"]
    assert "from smg.launch_router import" in in_container(ROUTER, "cat /usr/local/lib/sglang-router/sglang_router_launch.py")
    assert all_workers_healthy() == sorted((f"http://{address(name)}:30000", True) for name in ENGINES)
    # What clients saw: the router's restart onto smg is the one window in which requests can fail
    # (neither release takes over the other's listening socket); before and after it every
    # request is answered. Counted.
    got = summary(results)
    failed = [r for r in results if r["status"] != 200 or r["reply"] != "blackwell"]
    window = max(r["at"] + r["seconds"] for r in failed) - min(r["at"] for r in failed) if failed else 0.0
    print("move from sglang-router 0.3.2 to smg 1.13.0 under load:", got, f"failures within {window:.1f} s:",
          sorted({(r["status"], r["text"][:80]) for r in failed})[:5])
    # Kept beside the lab's inventory (the README's table is taken from it).
    (fleet["work"] / "move-load.json").write_text(json.dumps({"summary": got, "window": window, "failures": [
        (r["status"], r["text"][:80]) for r in failed]}))
    assert window <= 30, (window, got)
    assert got["sent"] - got["failed"] > 100, got
    status, body = through_router()
    assert status == 200 and json.loads(body)["choices"][0]["message"]["content"] == "blackwell", body
    code, report, output = drift_report(fleet["inventory"], PLAYBOOK, fleet["env"], fleet["work"] / "moved")
    assert code == 0, output
    # The switch kept the old unit and launcher until smg passed its gate, then let them go.
    kept = run.stdout.split("TASK [blackwell.sglang.sglang_router : Keep the router's files before this run switches them]")
    assert f"changed: [{ROUTER}]" in kept[1].split("TASK [")[0], run.stdout[-20000:]
    assert in_container(ROUTER, "ls -A /var/lib/sglang-router").strip() == ""


def admin(method: str, path: str, body: dict | None = None) -> str:
    """The router's admin API from its own node, with the key."""
    data = f"data=json.dumps({body!r}).encode(), " if body else ""
    return in_container(ROUTER, (
        "python3 -c \"import json, urllib.request as u; print(u.urlopen(u.Request('http://127.0.0.1:30100"
        f"{path}', {data}method='{method}', headers={{'Authorization': 'Bearer {KEY}', "
        "'Content-Type': 'application/json'})).read().decode())\""))


# A stray worker on the router's node: answers what the router asks a worker (the same test double
# as the engines' stand-in, reduced to the router's calls), on 127.0.0.1:31999.
STRAY = r"""
import json, http.server
class Handler(http.server.BaseHTTPRequestHandler):
    def _send(self, body):
        data = json.dumps(body).encode()
        self.send_response(200); self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data))); self.end_headers(); self.wfile.write(data)
    def do_GET(self):
        self._send([{"num_reqs": 0}] if self.path.startswith("/get_load") else {"model_path": "stray"})
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", 31999), Handler).serve_forever()
"""


def workers_now() -> list:
    return sorted((w["url"], w["is_healthy"]) for w in json.loads(admin("GET", "/workers"))["workers"])


def test_a_worker_taken_out_and_a_stray_one_are_drift_and_a_converge_mends_both(fleet):
    urls = {name: f"http://{address(name)}:30000" for name in ENGINES}
    out = ENGINES[2]
    (gone,) = [w for w in json.loads(admin("GET", "/workers"))["workers"] if w["url"] == urls[out]]
    admin("DELETE", f"/workers/{gone['id']}")
    subprocess.run(["podman", "exec", "-d", ROUTER, "python3", "-c", STRAY], check=True, capture_output=True)
    admin("POST", "/workers", {"url": "http://127.0.0.1:31999"})
    for _attempt in range(30):
        if [url for url, _healthy in workers_now()] == sorted([urls[ENGINES[0]], urls[ENGINES[1]],
                                                               "http://127.0.0.1:31999"]):
            break
        time.sleep(1)
    code, report, output = drift_report(fleet["inventory"], PLAYBOOK, fleet["env"], fleet["work"] / "workers")
    assert code == 1, output
    router = f"http://{address(ROUTER)}:30100"
    assert [f["reason"] for f in report["hosts"][ROUTER]["drift"]] == [
        f"{urls[out]} is not among the router's workers",
        "http://127.0.0.1:31999 is among the router's workers, but no host of the group serves there"], \
        report["hosts"][ROUTER]
    assert [f["reason"] for f in report["hosts"][out]["drift"]] == [
        f"{urls[out]} is not among the router's workers ({router})"], report["hosts"][out]
    assert {name: report["hosts"][name]["drift"] for name in ENGINES[:2]} == {name: [] for name in ENGINES[:2]}
    assert report["hosts"][ROUTER]["notes"]["router_workers"] == [
        f"{urls[ENGINES[0]]}: healthy", f"{urls[ENGINES[1]]}: healthy",
        f"{urls[out]}: removed (not among the router's workers)",
        "http://127.0.0.1:31999: listed, not one of the group's workers"]
    assert report["hosts"][out]["notes"]["router"] == [
        f"{urls[out]}: removed (not among the router's workers) (the router at {router})"]
    mend = converge(fleet, "-e", "sglang_rollout_serial=100%")
    in_container(ROUTER, "pkill -f '[T]hreadingHTTPServer' || true")
    assert mend.returncode == 0, mend.stdout[-20000:]
    assert KEY not in mend.stdout + mend.stderr
    changed = {name: count["changed"] for name, count in recap(mend.stdout).items()}
    assert changed == {ROUTER: 1, ENGINES[0]: 0, ENGINES[1]: 0, out: 1}, mend.stdout[-20000:]
    assert workers_now() == sorted((url, True) for url in urls.values())
    code, report, output = drift_report(fleet["inventory"], PLAYBOOK, fleet["env"], fleet["work"] / "mended")
    assert code == 0, output


# One of the router release's files changed on the node (pip's RECORD has its digest): drift on
# the router's host alone, the file named, and a converge installs the release again over itself,
# restarts the router onto it and leaves the engines alone.
ROUTER_FILE = "/opt/sglang-router/1.13.0/lib/python3.11/site-packages/smg/router_args.py"


def test_a_router_release_with_a_file_changed_is_drift_and_installed_again(fleet):
    in_container(ROUTER, f"echo '# changed on the node' >>{ROUTER_FILE}")
    before = in_container(ROUTER, "systemctl show -p MainPID --value sglang-router").strip()
    code, report, output = drift_report(fleet["inventory"], PLAYBOOK, fleet["env"], fleet["work"] / "router-release")
    assert code == 1, output
    assert [(f["label"], f["reason"]) for f in report["hosts"][ROUTER]["drift"]] == [(
        "sglang_router : Report that the router's release is installed again, and why",
        "smg 1.13.0 in /opt/sglang-router/1.13.0 differs from its RECORD: 1 file altered "
        "(smg/router_args.py); smg 1.13.0 is installed again")], report["hosts"][ROUTER]
    assert {name: report["hosts"][name]["drift"] for name in ENGINES} == {name: [] for name in ENGINES}
    mend = converge(fleet, "-e", "sglang_rollout_serial=100%")
    assert mend.returncode == 0, mend.stdout[-20000:]
    assert "changed on the node" not in in_container(ROUTER, f"cat {ROUTER_FILE}")
    assert in_container(ROUTER, "systemctl show -p MainPID --value sglang-router").strip() != before
    changed = {name: count["changed"] for name, count in recap(mend.stdout).items()}
    assert changed == {ROUTER: 4, **{name: 0 for name in ENGINES}}, mend.stdout[-20000:]
    assert all_workers_healthy() == sorted((f"http://{address(name)}:30000", True) for name in ENGINES)
    code, report, output = drift_report(fleet["inventory"], PLAYBOOK, fleet["env"], fleet["work"] / "router-mended")
    assert code == 0, output


def all_workers_healthy(seconds: int = 30) -> list:
    """The router's workers once it lists every engine as healthy (it adds and checks them in the
    background), or as they are after that many seconds."""
    want = sorted((f"http://{address(name)}:30000", True) for name in ENGINES)
    for _attempt in range(seconds):
        now = workers_now()
        if now == want:
            break
        time.sleep(1)
    return now


def test_a_stopped_router_is_started_behind_its_gate_before_its_workers_are_read(fleet):
    # Stopped by hand (or by a signal its Restart=on-failure does not restart after), unit unchanged.
    in_container(ROUTER, "systemctl stop sglang-router")
    run = converge(fleet, "-e", "sglang_rollout_serial=100%")
    assert run.returncode == 0, run.stdout[-20000:]
    assert KEY not in run.stdout + run.stderr
    # Started, then gated on /readiness before the worker list was read; it adds its
    # --worker-urls itself, so the role puts none back.
    changed = {name: count["changed"] for name, count in recap(run.stdout).items()}
    assert changed == {ROUTER: 1, **{name: 0 for name in ENGINES}}, run.stdout[-20000:]
    assert "RUNNING HANDLER [blackwell.sglang.sglang_router : Wait until the router is ready]" in run.stdout
    assert in_container(ROUTER, "systemctl is-active sglang-router").strip() == "active"
    assert all_workers_healthy() == sorted((f"http://{address(name)}:30000", True) for name in ENGINES)
    assert through_router()[0] == 200


def test_a_node_the_router_had_dropped_is_not_drained_before_its_restart(fleet):
    # A node the router no longer lists, whose engine is down, with a restart to come (its unit
    # changed by hand): the router sends it nothing, so there is nothing to wait for.
    name = ENGINES[1]
    url = f"http://{address(name)}:30000"
    (entry,) = [w for w in json.loads(admin("GET", "/workers"))["workers"] if w["url"] == url]
    admin("DELETE", f"/workers/{entry['id']}")
    in_container(name, "systemctl stop sglang; echo '# changed by hand' >>/etc/systemd/system/sglang.service")
    for _attempt in range(30):
        if url not in [listed for listed, _healthy in workers_now()]:
            break
        time.sleep(1)
    run = converge(fleet, "-e", f"sglang_rollout_hosts={name}")
    assert run.returncode == 0, run.stdout[-20000:]
    assert KEY not in run.stdout + run.stderr
    # No wait on the engine's /v1/loads (it was down: every try would have failed for
    # sglang_service_router_drain_timeout seconds), and no word of a drain on the report.
    assert f"FAILED - RETRYING: [{name}]: Wait for the requests this node holds to finish" not in run.stdout, \
        run.stdout[-20000:]
    assert "drained, but" not in run.stdout
    assert in_container(name, "systemctl is-active sglang").strip() == "active"
    assert "changed by hand" not in in_container(name, "cat /etc/systemd/system/sglang.service")
    # Back in the router after its health gate.
    assert all_workers_healthy() == sorted((f"http://{address(e)}:30000", True) for e in ENGINES)


def router_metrics() -> dict:
    """The router's request counters from its Prometheus endpoint (smg_*, as in 0.3.2): chat requests
    routed, and the engines' answers other than 200."""
    text = in_container(ROUTER, "python3 -c \"import urllib.request as u; "
                                "print(u.urlopen('http://127.0.0.1:29000/metrics').read().decode())\"")
    routed = failed = 0.0
    for line in text.splitlines():
        if line.startswith("smg_router_requests_total{") and 'endpoint="chat"' in line:
            routed += float(line.rsplit(" ", 1)[1])
        if line.startswith("smg_router_upstream_responses_total{") and 'status_code="200"' not in line:
            failed += float(line.rsplit(" ", 1)[1])
    return {"routed": routed, "failed": failed}


def under_load(fleet, *args: str, env: dict | None = None) -> tuple[subprocess.CompletedProcess, list, dict]:
    """A converge with args while the load runs through the router; the converge, every
    request's outcome and what the router's metrics counted meanwhile."""
    in_container(ROUTER, "rm -f /tmp/load.stop /tmp/load.json")
    before = router_metrics()
    subprocess.run(["podman", "exec", "-d", ROUTER, "python3", "-c", LOAD], check=True, capture_output=True)
    time.sleep(3)
    try:
        run = converge(fleet, *args, env=env)
    finally:
        in_container(ROUTER, "touch /tmp/load.stop; for i in $(seq 120); do test -e /tmp/load.json && exit 0; "
                             "sleep 1; done; exit 1")
    after = router_metrics()
    return run, json.loads(in_container(ROUTER, "cat /tmp/load.json")), {
        name: after[name] - before[name] for name in after}


def served(name: str) -> int:
    """The requests an engine's server has answered since it started (the stand-in's
    sglang:num_requests_total on /metrics)."""
    for line in scrape(f"{address(name)}:30000").splitlines():
        if line.startswith("sglang:num_requests_total"):
            return int(float(line.rsplit(" ", 1)[1]))
    raise AssertionError(f"{name} has no sglang:num_requests_total on /metrics")


def summary(results: list) -> dict:
    latencies = sorted(r["seconds"] for r in results)
    return {"sent": len(results), "failed": sum(1 for r in results if r["status"] != 200 or r["reply"] != "blackwell"),
            "p50": latencies[len(latencies) // 2], "p99": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]}


def test_an_upgrade_of_every_engine_under_load_fails_no_request(fleet):
    run, results, counted = under_load(fleet, "-e", "sglang_rollout_serial=1", env={"LAB_SGLANG_VERSION": "0.5.18"})
    assert run.returncode == 0, run.stdout[-20000:]
    for name in ENGINES:
        assert in_container(name, "readlink /opt/sglang/current").strip() == "/opt/sglang/releases/0.5.18", name
    got = summary(results)
    print("drained upgrade:", got, "router metrics:", counted)
    assert got["sent"] > 0 and got["failed"] == 0, [r for r in results if r["status"] != 200][:5]
    # The router's own count agrees: every request routed once, no engine answered with a failure.
    assert counted == {"routed": got["sent"], "failed": 0}, (counted, got)
    # Each engine was back in the router after its restart: its new server answered requests.
    assert all(served(name) > 0 for name in ENGINES), {name: served(name) for name in ENGINES}


def test_the_same_upgrade_without_draining_drops_requests(fleet):
    # One node is enough to show it (and keeps the test's time): the same move, 0.5.18 to 0.5.8.
    run, results, counted = under_load(fleet, "-e", "sglang_rollout_serial=1",
                                       "-e", "sglang_service_router_drain=false",
                                       "-e", f"sglang_rollout_hosts={ENGINES[0]}", env={"LAB_SGLANG_VERSION": "0.5.8"})
    assert run.returncode == 0, run.stdout[-20000:]
    assert in_container(ENGINES[0], "readlink /opt/sglang/current").strip() == "/opt/sglang/releases/0.5.8"
    got = summary(results)
    print("undrained upgrade of one node:", got, "router metrics:", counted)
    assert got["failed"] > 0, got
    assert counted["failed"] > 0 and counted["routed"] == got["sent"], (counted, got)


# Requests an engine is answering when its unit stops: SGLang (and the stand-in, as it does)
# finishes them on SIGTERM before it exits, within the unit's TimeoutStopSec. Three requests that
# each take 4 s, sent straight to one engine (no router in the way), then the unit restarted.
IN_FLIGHT = r"""
import json, threading, urllib.request
KEY, results = %r, []
def one():
    r = urllib.request.Request('http://127.0.0.1:30000/generate', data=json.dumps({'text': 'hi'}).encode(),
                               headers={'Authorization': 'Bearer ' + KEY, 'Content-Type': 'application/json'})
    try:
        a = urllib.request.urlopen(r, timeout=60); results.append([a.status, json.loads(a.read())['text']])
    except Exception as e:
        results.append([getattr(e, 'code', 0), str(e)])
threads = [threading.Thread(target=one) for _ in range(3)]
[t.start() for t in threads]; [t.join() for t in threads]
open('/tmp/inflight.json', 'w').write(json.dumps(results))
""" % KEY


def test_a_restart_finishes_the_requests_in_flight_first(fleet):
    name = ENGINES[1]
    slow = json.dumps(dict(json.loads(STANDIN), reply_delay=4.0, stop="graceful"))
    wait_healthy = ("for i in $(seq 60); do python3 -c \"import urllib.request as u; "
                    "u.urlopen('http://127.0.0.1:30000/health')\" 2>/dev/null && exit 0; sleep 0.5; done; exit 1")
    # Three starts by hand within the unit's StartLimitIntervalSec, beside the converges' own:
    # each clears the start counter first, as these restarts are the test's, not a crash loop.
    restart = "systemctl reset-failed sglang; systemctl restart sglang"
    in_container(name, f"echo '{slow}' >/etc/sglang-standin/config.json && {restart} && {wait_healthy}")
    try:
        in_container(name, "rm -f /tmp/inflight.json")
        subprocess.run(["podman", "exec", "-d", name, "python3", "-c", IN_FLIGHT], check=True, capture_output=True)
        time.sleep(1.5)
        began = time.monotonic()
        in_container(name, restart)
        took = time.monotonic() - began
        results = json.loads(in_container(name, "for i in $(seq 30); do test -s /tmp/inflight.json && break; "
                                                "sleep 0.5; done; cat /tmp/inflight.json"))
    finally:
        in_container(name, f"echo '{STANDIN}' >/etc/sglang-standin/config.json && {restart} && {wait_healthy}")
    # Every request already being answered got its answer; the stop waited for them, and no more.
    assert results == [[200, "blackwell"]] * 3, results
    assert 2.0 <= took < 15.0, took
    assert all_workers_healthy() == sorted((f"http://{address(n)}:30000", True) for n in ENGINES)


def exposure(name: str, unit: str) -> float:
    """The overall exposure systemd-analyze security gives a running unit (0 safe to 10 exposed)."""
    text = in_container(name, f"systemd-analyze security --no-pager {unit}")
    (level,) = re.findall(r"Overall exposure level for \S+: ([0-9.]+)", re.sub(r"\x1b\[[0-9;]*m", "", text))
    return float(level)


def test_the_router_unit_is_sandboxed_at_least_as_tightly_as_the_engine_unit(fleet):
    router, engine = exposure(ROUTER, "sglang-router.service"), exposure(ENGINES[0], "sglang.service")
    print("systemd-analyze security exposure: router", router, "engine", engine)
    assert router <= engine, (router, engine)


def restart_pending(name: str) -> str:
    """A restart to come on name (its unit changed by hand), and what the node runs now."""
    in_container(name, "echo '# changed by hand' >>/etc/systemd/system/sglang.service")
    return in_container(name, "md5sum /etc/systemd/system/sglang.service; systemctl show -p MainPID --value sglang")


def test_a_router_that_cannot_be_reached_stops_the_restart_unless_best_effort_is_chosen(fleet):
    # Two routers: one nobody answers at, listed first, and the lab's. The drain fails closed: the
    # node, whose engine serves, is refused before anything changes; best_effort notes the
    # unreachable router, still leaves the lab's (every router is drained) and restarts.
    name = ENGINES[1]
    dead, live = f"http://{address(ROUTER)}:30199", f"http://{address(ROUTER)}:30100"
    routers = json.dumps({"sglang_service_router_urls": [dead, live]})
    before = restart_pending(name)
    run = converge(fleet, "-e", routers, "-e", f"sglang_rollout_hosts={name}", env={"LAB_SGLANG_VERSION": "0.5.18"})
    assert run.returncode == 2, run.stdout[-20000:]
    assert (f"sglang_service: the router at {dead} did not answer GET /workers, so {name}, whose engine serves, "
            "cannot leave it before its server restarts: the restart would drop the requests the router sends it. "
            "Start the router, or correct sglang_service_router_urls; to restart without leaving a router that "
            "cannot be reached, set sglang_service_router_drain_policy: best_effort. Nothing was changed.") \
        in run.stdout, run.stdout[-20000:]
    assert in_container(name, "md5sum /etc/systemd/system/sglang.service; systemctl show -p MainPID --value sglang") \
        == before
    assert (f"http://{address(name)}:30000", True) in workers_now()
    run = converge(fleet, "-e", routers, "-e", "sglang_service_router_drain_policy=best_effort",
                   "-e", f"sglang_rollout_hosts={name}", env={"LAB_SGLANG_VERSION": "0.5.18"})
    assert run.returncode == 0, run.stdout[-20000:]
    assert KEY not in run.stdout + run.stderr
    assert f"WARNING: {name} not drained before its restart: the router at {dead} did not answer" in run.stdout, \
        run.stdout[-20000:]
    # The lab's router, second in the list, was left before the restart, and joined again after it.
    left = run.stdout.split("TASK [blackwell.sglang.sglang_service : Take this node out of the router]")
    assert len(left) == 3 and f"changed: [{name}]" in left[2].split("TASK [")[0], run.stdout[-20000:]
    assert "changed by hand" not in in_container(name, "cat /etc/systemd/system/sglang.service")
    assert all_workers_healthy() == sorted((f"http://{address(e)}:30000", True) for e in ENGINES)


def test_a_node_whose_rollback_passed_its_gate_rejoins_the_router(fleet):
    # ENGINES[1] runs 0.5.18; the move to 0.5.8, which its stand-in now refuses, fails the gate
    # after the node left the router; the rollback to 0.5.18 passes it again, and the node, serving
    # what it served before, goes back into the router. The host still fails: the rollout stops.
    name = ENGINES[1]
    assert in_container(name, "readlink /opt/sglang/current").strip() == "/opt/sglang/releases/0.5.18"
    refuse = json.dumps(dict(json.loads(STANDIN), refuse_versions=["0.5.8"]))
    in_container(name, f"echo '{refuse}' >/etc/sglang-standin/config.json")
    try:
        run = converge(fleet, "-e", f"sglang_rollout_hosts={name}", env={"LAB_SGLANG_VERSION": "0.5.8"})
    finally:
        in_container(name, f"echo '{STANDIN}' >/etc/sglang-standin/config.json")
    assert run.returncode == 2, run.stdout[-20000:]
    assert "rolled back to the previous release /opt/sglang/releases/0.5.18" in run.stdout, run.stdout[-20000:]
    assert "which answers /health again" in run.stdout
    assert KEY not in run.stdout + run.stderr
    assert in_container(name, "readlink /opt/sglang/current").strip() == "/opt/sglang/releases/0.5.18"
    assert "TASK [blackwell.sglang.sglang_service : Put this node back into the router]" in run.stdout
    assert all_workers_healthy() == sorted((f"http://{address(e)}:30000", True) for e in ENGINES)


def test_a_key_the_router_does_not_take_is_refused_before_the_node_changes(fleet):
    # A key change with draining on: the running router still holds the old key and answers the
    # node's GET /workers with 401, so the node could not leave it before its restart.
    name, other = ENGINES[0], "sk-router-lab-OTHER-key"
    files = "md5sum /etc/systemd/system/sglang.service /etc/sglang/sglang.env; systemctl show -p MainPID --value sglang"
    before = in_container(name, files)
    run = converge(fleet, "-e", f"sglang_service_api_key={other}", "-e", f"sglang_rollout_hosts={name}")
    assert run.returncode == 2, run.stdout[-20000:]
    assert (f"sglang_service: the router at http://{address(ROUTER)}:30100 answered GET /workers with HTTP 401, so "
            f"{name} cannot leave it before its server restarts. The router does not take the engines' "
            "sglang_service_api_key: a key change is a run with -e sglang_service_router_drain=false") in run.stdout, \
        run.stdout[-20000:]
    assert ("Check sglang_service_router_urls, or set sglang_service_router_drain_policy: best_effort to restart "
            "without leaving a router that answers with an error. Nothing was changed.") in run.stdout
    assert KEY not in run.stdout + run.stderr and other not in run.stdout + run.stderr
    # Nothing changed on the node: the same unit, secrets and server; the router still routes to it.
    assert in_container(name, files) == before
    assert (f"http://{address(name)}:30000", True) in workers_now()


def test_a_router_release_the_wheelhouse_lacks_is_refused_and_the_router_keeps_serving(fleet):
    unit = in_container(ROUTER, "cat /etc/systemd/system/sglang-router.service")
    run = subprocess.run(["ansible-playbook", "-i", str(fleet["inventory"]), str(ROOT / "playbooks" / "router.yml"),
                          "-e", "sglang_router_version=0.0.99",
                          # Hashes of its own, so that the install is tried: the collection has none for it.
                          "-e", '{"sglang_router_sha256": ["' + "0" * 64 + '"]}'], cwd=ROOT, env=fleet["env"], capture_output=True,
                         text=True, check=False)
    assert run.returncode == 2, run.stdout[-5000:]
    assert "smg 0.0.99 could not be installed from the configured sources" in run.stdout, run.stdout[-5000:]
    assert "The router's account, unit, secrets and service were not changed." in run.stdout
    assert KEY not in run.stdout + run.stderr
    # Nothing of the failed release stays; the router runs on as it was.
    assert in_container(ROUTER, "ls /opt/sglang-router").split() == ["1.13.0"]
    assert in_container(ROUTER, "cat /etc/systemd/system/sglang-router.service") == unit
    assert in_container(ROUTER, "systemctl is-active sglang-router").strip() == "active"
    assert through_router()[0] == 200


def test_a_router_that_fails_its_gate_after_a_change_goes_back_to_what_it_ran_before(fleet):
    """A launch the router cannot start with (here an argument its parser refuses; a release
    that does not start is the same) fails its gate: the router goes back to the unit and
    launcher it ran before, serves again, and the host fails saying so."""
    files = "md5sum /etc/systemd/system/sglang-router.service /usr/local/lib/sglang-router/sglang_router_launch.py"
    before = in_container(ROUTER, files)
    bad = {"sglang_router_extra_args": ["--health-check-interval-secs", "2", "--disable-retries", "--no-such-flag"],
           "sglang_router_health_timeout": 15}
    run = subprocess.run(["ansible-playbook", "-i", str(fleet["inventory"]), str(ROOT / "playbooks" / "router.yml"),
                          "-e", json.dumps(bad)], cwd=ROOT, env=fleet["env"], capture_output=True, text=True, check=False)
    assert run.returncode == 2, run.stdout[-5000:]
    unit_path = "/etc/systemd/system/sglang-router.service"
    assert (f"The router on {ROUTER} did not become ready (/readiness: no answer) within 15s after this run changed "
            f"{unit_path}; put back from its rollback record: {unit_path}. Restarted on what it ran before, it is ready "
            "again: it serves as it did before. Its log: journalctl -u sglang-router.") in run.stdout, run.stdout[-5000:]
    assert KEY not in run.stdout + run.stderr
    assert in_container(ROUTER, files) == before
    assert in_container(ROUTER, "systemctl is-active sglang-router").strip() == "active"
    assert "--no-such-flag" not in in_container(ROUTER, "systemctl show -p ExecStart --value sglang-router")
    assert through_router()[0] == 200
    # Nothing is left to go back to, and the node holds what the inventory says: nothing to do.
    assert in_container(ROUTER, "ls -A /var/lib/sglang-router").strip() == ""
    again = subprocess.run(["ansible-playbook", "-i", str(fleet["inventory"]), str(ROOT / "playbooks" / "router.yml")],
                           cwd=ROOT, env=fleet["env"], capture_output=True, text=True, check=False)
    assert again.returncode == 0, again.stdout[-5000:]
    assert {name: count["changed"] for name, count in recap(again.stdout).items()}[ROUTER] == 0, again.stdout[-5000:]


def test_a_rollback_record_a_killed_run_left_is_drift_and_the_next_converge_finishes_the_switch(fleet):
    """A run killed between its record and the router's gate leaves the record: a check reports
    it, and the next converge restarts the router behind its gate, then lets the record go."""
    start = "/etc/sglang-router/router.env,/usr/local/lib/sglang-router/sglang_router_launch.py,/etc/systemd/system/sglang-router.service"
    planted = subprocess.run(["ansible", ROUTER, "-i", str(fleet["inventory"]), "-b", "-m", "blackwell.sglang.sglang_rollback",
                              "-a", f"path=/var/lib/sglang-router/rollback files={start} keep_current=/etc/sglang-router/router.env"],
                             cwd=ROOT, env=fleet["env"], capture_output=True, text=True, check=False)
    assert planted.returncode == 0 and '"changed": true' in planted.stdout, planted.stdout + planted.stderr
    router = ["ansible-playbook", "-i", str(fleet["inventory"]), str(ROOT / "playbooks" / "router.yml")]
    # -v: the module's message, which the default output leaves out of a changed result.
    check = subprocess.run(router + ["--check", "-v"], cwd=ROOT, env=fleet["env"], capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stdout[-5000:]
    assert "a rollout that did not finish left its rollback record /var/lib/sglang-router/rollback" in check.stdout, \
        check.stdout[-5000:]
    assert KEY not in check.stdout + check.stderr
    assert in_container(ROUTER, "test -d /var/lib/sglang-router/rollback && echo kept").strip() == "kept"
    pid = in_container(ROUTER, "systemctl show -p MainPID --value sglang-router").strip()
    run = subprocess.run(router, cwd=ROOT, env=fleet["env"], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stdout[-5000:]
    # The module's warning (on standard error): the record is that run's, kept as it is.
    assert "holds the rollback record of a rollout that did not finish" in run.stderr, run.stdout[-5000:] + run.stderr
    assert "RUNNING HANDLER [blackwell.sglang.sglang_router : Restart sglang-router]" in run.stdout
    assert in_container(ROUTER, "systemctl show -p MainPID --value sglang-router").strip() != pid
    assert in_container(ROUTER, "ls -A /var/lib/sglang-router").strip() == ""
    assert through_router()[0] == 200


def removal(fleet, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ansible-playbook", "-i", str(fleet["inventory"]), str(ROOT / "playbooks" / "remove.yml"),
                           *args], cwd=ROOT, env=fleet["env"], capture_output=True, text=True, check=False)


def test_a_removed_engine_leaves_the_router_first_and_the_router_goes_with_nothing_left(fleet):
    gone = ENGINES[2]
    run = removal(fleet, "-e", f"sglang_rollout_hosts={gone}")
    assert run.returncode == 0, run.stdout[-20000:]
    assert KEY not in run.stdout + run.stderr
    # Out of the router before its server stopped; the others still serve through it.
    assert [url for url, _healthy in workers_now()] == sorted(f"http://{address(name)}:30000" for name in ENGINES[:2])
    assert in_container(gone, "systemctl is-active sglang || true").strip() != "active"
    status, body = through_router()
    assert status == 200, body
    # The router alone (sglang_rollout_hosts limits it as it limits the engines), then again: nothing left.
    run = removal(fleet, "-e", f"sglang_rollout_hosts={ROUTER}")
    assert run.returncode == 0, run.stdout[-20000:]
    assert {name: count["changed"] for name, count in recap(run.stdout).items()}[ROUTER] > 0, run.stdout[-5000:]
    assert in_container(ROUTER, "ls -d /etc/systemd/system/sglang-router.service /etc/sglang-router /opt/sglang-router "
                                "/usr/local/lib/sglang-router /var/lib/sglang-router 2>/dev/null; getent passwd sglang-router; "
                                "getent group sglang-router; true") == ""
    # systemd forgot the unit too (the role reloads it after removing the file).
    assert in_container(ROUTER, "systemctl show -p LoadState --value sglang-router").strip() == "not-found"
    for name in ENGINES[:2]:
        assert in_container(name, "systemctl is-active sglang").strip() == "active", name
    again = removal(fleet, "-e", f"sglang_rollout_hosts={ROUTER}")
    assert again.returncode == 0, again.stdout[-20000:]
    assert {name: count["changed"] for name, count in recap(again.stdout).items()} == {ROUTER: 0}, again.stdout[-5000:]
