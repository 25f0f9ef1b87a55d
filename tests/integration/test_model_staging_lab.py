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
  they were.
"""
from __future__ import annotations

import json
import subprocess

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
    unit = names.index("blackwell.sglang.sglang_service : Write the systemd unit")
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
