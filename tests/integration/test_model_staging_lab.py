"""Model staging and the NCCL smoke test before the service, on a lab node over SSH.

tools/lab/lab.sh brings up one container node of the stock lab image (Ansible logging in as the
sudo user `debian`, a stand-in nvidia-smi presenting 8 RTX PRO 6000 Blackwell GPUs, the real
SGLang 0.5.8 wheel installed with --no-deps, so the venv holds no torch) and converges site.yml.
The hub cannot be reached, so the model comes from a path on the node, a directory laid out
like a Hugging Face snapshot with real safetensors shards (tests/model_snapshot.py), copied
into the node. Then, with site.yml and that source declared:
- the converge that built the lab skipped the NCCL smoke test with its message (no torch);
- --check reports the model missing, the files counted, and changes nothing on the node;
- a converge stages the model, and only then restarts the service onto it; again: 0 changed;
- a source with a shard missing stops the host before the service role: unit and server as
  they were;
- a uv wheel whose digest is not the pinned one is refused by pip, the host stopped before its
  service;
- a hub download from a stand-in hub (tests/stand_in_hub.py) with a token and an API key, at
  -vvv, leaves neither secret anywhere but the secrets file and the hub's request headers;
- two converges of the node never overlap: the second waits, then fails naming the first; one
  killed while it holds the node leaves the lock to the next, which takes it over.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

import model_snapshot
from conftest import ROOT, VENV_BIN, in_container, lab_env, running_lab

pytestmark = pytest.mark.lab

PREFIX = "model-staging"
NODE = f"{PREFIX}-01"
SOURCE = "/srv/models/tiny"
BROKEN = "/srv/models/broken"
DEST = "/opt/sglang/models/tiny"
STATE = r"""
set -e
sha256sum /etc/systemd/system/sglang.service /etc/sglang/sglang.env
systemctl show -p ActiveState -p MainPID -p ExecMainStartTimestamp sglang.service
ls -la /opt/sglang/models 2>&1 || true
"""


# The service as it runs: its unit, its secrets file, the process.
SERVICE = "\n".join(STATE.strip().splitlines()[:3])


def on_node(script: str) -> str:
    return in_container(NODE, script)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    work = tmp_path_factory.mktemp("model-lab")
    env = lab_env(work, PREFIX, "2750")
    with running_lab(env) as up:
        model_snapshot.make_model(work / "tiny", shards=3)
        model_snapshot.make_model(work / "broken", shards=3)
        (work / "broken" / "model-00002-of-00003.safetensors").unlink()
        on_node("mkdir -p /srv/models")
        for name in ("tiny", "broken"):
            subprocess.run(["podman", "cp", str(work / name), f"{NODE}:/srv/models/{name}"], check=True)
        yield {"env": env, "inventory": work / "inventory", "converge": up.stdout}


def site(lab, source: str, dest: str, *args: str, expect_rc: int = 0):
    """One site.yml run with the model declared; (task name, result) of the node, in order."""
    env = dict(lab["env"], ANSIBLE_STDOUT_CALLBACK="ansible.posix.json")
    env.pop("ANSIBLE_CALLBACKS_ENABLED", None)
    proc = subprocess.run(
        [str(VENV_BIN / "ansible-playbook"), "-i", str(lab["inventory"]), str(ROOT / "site.yml"),
         "-e", f"sglang_model_source_path={source}", "-e", "sglang_model_source_mode=copy",
         "-e", f"sglang_model_dest={dest}", "-e", f"sglang_service_model_path={dest}", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, check=False,
    )
    assert proc.returncode == expect_rc, proc.stdout[-20000:] + proc.stderr[-5000:]
    report = json.JSONDecoder().raw_decode(proc.stdout[proc.stdout.index("{"):])[0]
    return [(t["task"]["name"], t["hosts"][NODE]) for p in report["plays"] for t in p["tasks"]
            if NODE in t["hosts"]]


def changed(tasks):
    return [name for name, result in tasks if result.get("changed")]


def test_the_lab_converge_skipped_the_nccl_smoke_test_for_lack_of_torch(lab):
    assert ("NCCL smoke test skipped: /opt/sglang/releases/0.5.8/bin/python cannot import torch: nothing was run"
            in lab["converge"])


def test_check_reports_the_missing_model_and_changes_nothing(lab):
    before = on_node(STATE)
    tasks = site(lab, SOURCE, DEST, "--check")
    report = [r for name, r in tasks if name.endswith("Report the staged model as missing or incomplete")]
    assert [r["msg"] for r in report] == [
        f"sglang_model: not staged: {DEST} does not exist: 5 of 5 expected files missing"]
    assert on_node(STATE) == before


def test_converge_stages_the_model_before_the_service_restarts_onto_it(lab):
    before = on_node("systemctl show -p MainPID --value sglang.service")
    tasks = site(lab, SOURCE, DEST)
    names = [name for name, _r in tasks]
    copied = names.index("blackwell.sglang.sglang_model : Copy the model from its source")
    verified = names.index("blackwell.sglang.sglang_model : Read the model as staged")
    unit = names.index("blackwell.sglang.sglang_service : Write the files the server starts from")
    assert copied < verified < unit
    assert dict(tasks)["blackwell.sglang.sglang_model : Read the model as staged"]["complete"] is True
    assert on_node(f"sha256sum {SOURCE}/*.safetensors | sed 's#{SOURCE}##'") == \
        on_node(f"sha256sum {DEST}/*.safetensors | sed 's#{DEST}##'")
    assert f"--model-path {DEST}" in on_node("cat /etc/systemd/system/sglang.service")
    after = on_node("systemctl show -p MainPID --value sglang.service")
    assert after != before and after.strip() != "0"
    assert changed(site(lab, SOURCE, DEST)) == []


def test_a_model_that_cannot_be_staged_stops_the_host_before_its_service(lab):
    before = on_node(STATE)
    tasks = site(lab, BROKEN, "/opt/sglang/models/broken", expect_rc=2)
    failed = [(name, r["msg"]) for name, r in tasks if r.get("failed")]
    assert failed == [(
        "blackwell.sglang.sglang_model : Refuse a model that cannot be staged",
        f"sglang_model: the model cannot be staged from {BROKEN}: {BROKEN}: 1 of 5 expected files "
        "missing (model-00002-of-00003.safetensors). Nothing was changed.",
    )]
    assert not [name for name, _r in tasks if name.startswith("blackwell.sglang.sglang_service")]
    assert on_node(STATE) == before


def test_a_uv_wheel_other_than_the_pinned_digest_is_refused_by_pip(lab):
    """The lab pins uv's wheel by its sha256 (inventories/lab); given another digest, pip, reading
    the requirement and its hash from standard input, refuses the real wheel and the host stops
    before its service. The lab's own digest installs it again."""
    on_node("rm -rf /opt/sglang/uv")
    before = on_node(SERVICE)
    wrong = "0" * 64
    tasks = site(lab, SOURCE, DEST, "-e", json.dumps({"sglang_install_uv_sha256": [wrong]}), expect_rc=2)
    failed = [(name, r) for name, r in tasks if r.get("failed")]
    assert [name for name, _r in failed] == ["blackwell.sglang.sglang_install : Install the pinned uv release"]
    stderr = failed[0][1]["stderr"]
    assert "THESE PACKAGES DO NOT MATCH THE HASHES FROM THE REQUIREMENTS FILE" in stderr
    assert f"Expected sha256 {wrong}" in stderr
    assert "Got        d7f459fe4fd247d830351c75686d3996ace3c6f3f728eb0e85a30b7ada0cef19" in stderr
    assert on_node("ls /opt/sglang/uv/lib/python3*/site-packages | grep -c '^uv' || true").strip() == "0"
    assert on_node(SERVICE) == before
    again = site(lab, SOURCE, DEST)
    assert "blackwell.sglang.sglang_install : Install the pinned uv release" in changed(again)
    assert on_node("/opt/sglang/uv/bin/uv --version").split()[:2] == ["uv", "0.13.9"]


HF_TOKEN = "hf_stageSECRETtoken8c2e"
API_KEY = "sk-stageSECRETkey41b7"
HUB_PORT = 8088
HUB_RECORD = "/srv/hub-record.jsonl"
HUB_CLIENT = "/opt/hub-client"
SECRETS_FILE = "/etc/sglang/sglang.env"


def test_a_hub_download_keeps_the_token_off_every_command_line_log_and_file(lab, tmp_path):
    """A first download from the hub (a stand-in at HF_ENDPOINT, tests/stand_in_hub.py, serving
    the tiny snapshot) with a token and an API key set, converged at -vvv: the hub received the
    token, and neither secret is in Ansible's output, the node's journal (sudo's entries
    included), any process's command line while the download ran, or any file on the node but
    the 0600 secrets file."""
    hub = tmp_path / "stand_in_hub.py"
    hub.write_text((ROOT / "tests" / "stand_in_hub.py").read_text())
    subprocess.run(["podman", "cp", str(hub), f"{NODE}:/srv/stand_in_hub.py"], check=True)
    # The download runs with a venv's huggingface_hub, as it would with a full SGLang release's.
    on_node(f"mkdir -p /srv/hub/lab && cp -r {SOURCE} /srv/hub/lab/tiny && rm -f {HUB_RECORD} && "
            f"/opt/sglang/uv/bin/uv venv -q --python /usr/bin/python3 {HUB_CLIENT} && "
            f"/opt/sglang/uv/bin/uv pip install -q --python {HUB_CLIENT}/bin/python --offline --no-index "
            "--find-links /srv/wheelhouse huggingface_hub==0.36.0 && "
            f"systemd-run --unit stand-in-hub python3 /srv/stand_in_hub.py /srv/hub {HUB_PORT} {HUB_RECORD} && "
            f"for i in $(seq 50); do python3 -c 'import urllib.request as u; u.urlopen(\"http://127.0.0.1:{HUB_PORT}/api/models/lab/tiny/revision/main\")' "
            "2>/dev/null && break; sleep 0.2; done")
    on_node(f": > {HUB_RECORD}")
    since = on_node("date '+%Y-%m-%d %H:%M:%S'").strip()
    settings = tmp_path / "secrets.yml"
    settings.write_text(json.dumps({
        "sglang_model_repo_id": "lab/tiny", "sglang_model_revision": "main", "sglang_model_allow_moving_revision": True,
        "sglang_model_hf_endpoint": f"http://127.0.0.1:{HUB_PORT}", "sglang_model_venv": HUB_CLIENT,
        "sglang_service_model_path": "lab/tiny",
        "sglang_service_hf_token": HF_TOKEN, "sglang_service_api_key": API_KEY}))
    proc = subprocess.run(
        [str(VENV_BIN / "ansible-playbook"), "-vvv", "-i", str(lab["inventory"]), str(ROOT / "site.yml"),
         "-e", f"@{settings}"],
        cwd=ROOT, env=lab["env"], capture_output=True, text=True, check=False)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-20000:]
    assert "Download the model into the hub cache as the service user" in output

    record = [json.loads(line) for line in on_node(f"cat {HUB_RECORD}").splitlines()]
    downloads = [r for r in record if r["method"] == "GET" and "/resolve/" in r["path"]]
    assert len(downloads) == 6, record
    assert {r["authorization"] for r in record} == {f"Bearer {HF_TOKEN}"}
    command_lines = next(r["command_lines"] for r in downloads if "command_lines" in r)
    assert any("sglang_model_download" in line or "hf_download.py" in line for line in command_lines), command_lines

    snapshot = on_node("ls -d /var/lib/sglang/.cache/huggingface/hub/models--lab--tiny/snapshots/*").strip()
    assert on_node(f"stat -c '%U %a' {SECRETS_FILE}").split() == ["root", "600"]
    assert on_node(f"stat -L -c %U {snapshot}/config.json").strip() == "sglang"
    journal = on_node(f"journalctl --no-pager -o cat --since '{since}'")
    assert "COMMAND=" in journal  # sudo's own entries are in what is searched
    # Besides the secrets file, only the test doubles' own records may hold them: the stand-in
    # hub's (the token it was sent) and the stand-in engine's (the environment systemd gave it
    # from the secrets file, as it gives the real engine).
    leaks = on_node(
        f"grep -rlsF -e {HF_TOKEN} -e {API_KEY} / --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev "
        f"| grep -vxF -e {SECRETS_FILE} -e {HUB_RECORD} -e /var/lib/sglang-standin/launches.jsonl || true")
    for secret in (HF_TOKEN, API_KEY):
        assert secret not in output
        assert secret not in journal
        assert not [line for line in command_lines if secret in line]
    assert leaks.split() == []


LOCK = "/run/lock/blackwell-sglang/node.lock"


def start_site(lab, *args: str) -> subprocess.Popen:
    env = dict(lab["env"], ANSIBLE_STDOUT_CALLBACK="ansible.posix.json")
    env.pop("ANSIBLE_CALLBACKS_ENABLED", None)
    return subprocess.Popen(
        [str(VENV_BIN / "ansible-playbook"), "-i", str(lab["inventory"]), str(ROOT / "site.yml"),
         "-e", f"sglang_model_source_path={SOURCE}", "-e", "sglang_model_source_mode=copy",
         "-e", f"sglang_model_dest={DEST}", "-e", f"sglang_service_model_path={DEST}", *args],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def finish_site(proc: subprocess.Popen, expect_rc: int):
    out, err = proc.communicate(timeout=900)
    assert proc.returncode == expect_rc, out[-20000:] + err[-5000:]
    report = json.JSONDecoder().raw_decode(out[out.index("{"):])[0]
    return [(t["task"]["name"], t["hosts"][NODE]) for p in report["plays"] for t in p["tasks"]
            if NODE in t["hosts"]]


def lock_holder(run: subprocess.Popen) -> dict:
    """The node's lock once RUN holds it (an earlier run that failed may have left its own)."""
    for _attempt in range(1200):
        text = in_container(NODE, f"cat {LOCK} 2>/dev/null || true").strip()
        if text and json.loads(text)["pid"] == run.pid:
            return json.loads(text)
        assert run.poll() is None, run.communicate()
        time.sleep(0.25)
    raise AssertionError(f"the converge {run.pid} never took the node's lock")


def test_two_converges_of_one_node_never_overlap(lab):
    """A converge holds the node (paused right after taking its lock, so the overlap is certain);
    a second converge waits its timeout and fails naming the first, before any task of a role;
    the first then finishes and releases the lock. A converge killed while it holds the node
    leaves the lock to the next converge of this controller, which takes it over."""
    first = start_site(lab)
    holder = lock_holder(first)
    # Only ansible-playbook itself: its SSH connection masters, shared with the second run, go on.
    os.kill(first.pid, signal.SIGSTOP)
    try:
        assert in_container(NODE, f"stat -c '%U %a %F' {LOCK} {os.path.dirname(LOCK)}").split() == [
            "root", "600", "regular", "file", "root", "700", "directory"]
        second = finish_site(start_site(lab, "-e", "sglang_rollout_lock_timeout=2"), expect_rc=2)
    finally:
        os.kill(first.pid, signal.SIGCONT)
    failed = [(name, r["msg"]) for name, r in second if r.get("failed")]
    assert failed == [("Hold the node for this converge", (
        f"another converge holds this node: ansible-playbook (PID {first.pid}) on {holder['controller']} as "
        f"{holder['user']}, since {holder['since']} (lock {LOCK}). Waited 2 s. Run again when it has finished; it is "
        "not known to have ended: its ansible-playbook process is still running here. If it is gone without releasing "
        f"the lock, run again with sglang_rollout_lock_break={holder['owner']} (the task's take_over) to take over "
        "this lock and no other."))]
    assert not [name for name, _r in second if name.startswith("blackwell.sglang.")]
    finish_site(first, expect_rc=0)
    assert in_container(NODE, f"test -e {LOCK} && echo held || echo free").strip() == "free"

    killed = start_site(lab)
    left = lock_holder(killed)
    os.killpg(killed.pid, signal.SIGKILL)
    killed.wait()
    assert json.loads(in_container(NODE, f"cat {LOCK}")) == left
    tasks = finish_site(start_site(lab), expect_rc=0)
    taken = dict(tasks)["Hold the node for this converge"]
    assert taken["took_over"] == left
    assert in_container(NODE, f"test -e {LOCK} && echo held || echo free").strip() == "free"
