"""End state of the sglang_service role on two lab nodes (real SGLang 0.5.8 and 0.5.23 source,
stand-in engine), plus refusals run against the converged nodes."""
from __future__ import annotations

import json
import os
import shlex
from contextlib import contextmanager
from pathlib import Path

import pytest

from labtools import HEALTHY, LAUNCHES, failure_message, lab_host, records, recap, run_playbook

CONVERGE = Path(os.environ["MOLECULE_SCENARIO_DIRECTORY"]) / "converge.yml"
UNIT = "/etc/systemd/system/sglang.service"
ENV_FILE = "/etc/sglang/sglang.env"
LAUNCHER = "/usr/local/lib/blackwell-sglang/sglang_launch.py"
HF_TOKEN = "hf_labSECRETtoken5d1f"
API_KEY = "sk-labSECRETkey93ab"
SECRETS = (HF_TOKEN, API_KEY)

COMMON_HEAD = [
    "--model-path", "/models/Kimi-K2.5",
    "--served-model-name", "kimi-k2.5",
    "--host", "0.0.0.0",
    "--port", "30000",
]
EAGLE3_AND_EXTRA = [
    "--speculative-algorithm", "EAGLE3",
    "--speculative-draft-model-path", "/var/lib/sglang/models/Kimi-K2.5-eagle3",
    "--speculative-num-steps", "3",
    "--speculative-eagle-topk", "1",
    "--speculative-num-draft-tokens", "4",
    "--mem-fraction-static", "0.85",
    "--trust-remote-code",
]
# argv the engine receives; the API key arrives through ${SGLANG_API_KEY} in ExecStart.
EXPECTED_ARGV = {
    # 0.5.8: the boolean fusion flag; 4 GPUs from the facts.
    "sglang_service-old": COMMON_HEAD + ["--tp-size", "4", "--enable-torch-symm-mem",
                                         "--enable-flashinfer-allreduce-fusion", "--enable-metrics"]
    + EAGLE3_AND_EXTRA + ["--api-key", API_KEY],
    # 0.5.23 deprecates it: the backend flag with auto.
    "sglang_service-new": COMMON_HEAD + ["--tp-size", "2", "--enable-torch-symm-mem",
                                         "--flashinfer-allreduce-fusion-backend", "auto", "--enable-metrics"]
    + EAGLE3_AND_EXTRA + ["--api-key", API_KEY],
}
CRASH_MESSAGE = (
    'sglang_service: refusing to deploy: SGLang 0.5.23 raises "FlashInfer allreduce fusion '
    'requires SM90 or SM10X NVIDIA GPUs." at start-up, and this node has compute capability 12 '
    "GPUs, so sglang.service would crash and restart in a loop. Set "
    "sglang_service_flashinfer_fusion_enabled: false, install a release whose fusion supports "
    "these GPUs, or set sglang_service_crash_policy: force if this release is patched to support them."
)
SM120_PCIE = {"present": True, "count": 2, "capability_majors": [12], "topology": {"summary": "pcie_only"}}


NODES = ["sglang_service-old", "sglang_service-new"]


@pytest.fixture(params=NODES)
def node(request):
    return request.param, lab_host(request.param)


def _state(host):
    """What a refused run must leave alone: file contents, mtimes, and the engine's launches."""
    return (
        host.file(UNIT).sha256sum, host.file(UNIT).mtime,
        host.file(ENV_FILE).sha256sum, host.file(ENV_FILE).mtime,
        host.file(LAUNCHER).sha256sum, host.file(LAUNCHER).mtime,
        len(records(host, LAUNCHES)),
    )


def test_unit_passes_systemd_analyze_verify_without_output(node):
    host = node[1]
    result = host.run("systemd-analyze verify %s", UNIT)
    assert result.rc == 0
    assert result.stdout == "" and result.stderr == ""


def test_files_have_owners_and_modes(node):
    host = node[1]
    unit, env_file, conf_dir = host.file(UNIT), host.file(ENV_FILE), host.file("/etc/sglang")
    assert (unit.user, unit.group, unit.mode) == ("root", "root", 0o644)
    assert (env_file.user, env_file.group, env_file.mode) == ("root", "root", 0o600)
    assert (conf_dir.user, conf_dir.group, conf_dir.mode) == ("root", "root", 0o755)


def test_service_runs_under_systemd_as_the_service_user(node):
    host = node[1]
    assert host.run("systemctl is-active sglang.service").stdout.strip() == "active"
    assert host.run("systemctl is-enabled sglang.service").stdout.strip() == "enabled"
    launch = records(host, LAUNCHES)[-1]
    assert launch["user"] == "sglang"
    # The unit names the link; the launcher runs on from the release it points at.
    release = host.check_output("readlink /opt/sglang/current")
    assert release.startswith("/opt/sglang/releases/0.5.")
    assert launch["python"] == f"{release}/bin/python"
    assert launch["sglang_path"] == [f"{release}/lib/python3.11/site-packages/sglang"]
    pid = host.run("systemctl show -p MainPID --value sglang.service").stdout.strip()
    assert str(launch["pid"]) == pid
    assert records(host, HEALTHY), "the health gate never saw /health answer 200"


def test_engine_gets_exact_flags_for_its_release(node):
    name, host = node
    assert records(host, LAUNCHES)[-1]["argv"] == EXPECTED_ARGV[name]


def test_environment_of_the_engine(node):
    name, host = node
    environ = records(host, LAUNCHES)[-1]["environ"]
    assert environ["CUDA_HOME"] == "/usr/local/cuda"
    assert environ["PATH"].startswith("/usr/local/cuda/bin:/opt/sglang/current/bin:")
    # The secrets reach the engine only through the environment file.
    assert environ["HF_TOKEN"] == HF_TOKEN
    assert environ["SGLANG_API_KEY"] == API_KEY
    pcie = {key: value for key, value in environ.items() if key.startswith("SGLANG_") and "PCIE" in key}
    if name == "sglang_service-new":
        # 0.5.23 ships the PCIe IPC all-reduce and the facts say pcie_only.
        assert pcie == {"SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": "1", "SGLANG_PCIE_IPC_MAX_NUMEL": "8388608"}
    else:
        assert pcie == {}


def test_unit_limits_and_restart_policy(node):
    host = node[1]
    props = dict(
        line.split("=", 1)
        for line in host.check_output(
            "systemctl show sglang.service -p LimitMEMLOCK -p LimitNOFILE -p LimitSTACK -p KillMode "
            "-p Restart -p TimeoutStopUSec -p StartLimitBurst -p StartLimitIntervalUSec -p User -p Group"
        ).splitlines()
    )
    assert props == {
        "LimitMEMLOCK": "infinity", "LimitNOFILE": "1048576", "LimitSTACK": "67108864",
        "KillMode": "mixed", "Restart": "on-failure", "TimeoutStopUSec": "2min",
        "StartLimitBurst": "3", "StartLimitIntervalUSec": "10min", "User": "sglang", "Group": "sglang",
    }


# Waits until the engine on this node answers /health with 200 (the image has no curl).
HEALTHY_AGAIN = ("python3 -c 'import time, urllib.request\n"
                 "for _ in range(120):\n"
                 "    try:\n"
                 "        urllib.request.urlopen(\"http://127.0.0.1:30000/health\", timeout=2); break\n"
                 "    except OSError: time.sleep(0.5)\n"
                 "else: raise SystemExit(\"not healthy again\")'")


def test_a_serving_engine_restarted_stops_by_its_own_exit_not_a_timeout(node):
    """The unit as written for hosts (KillMode=mixed, TimeoutStopSec=120) stops the serving
    stand-in with SIGTERM and systemd sees the unit's processes gone: its journal says
    "Deactivated successfully", never that the stop timed out or that processes outlived the
    final SIGKILL (what cost every lab restart its 120 s)."""
    host = node[1]
    since = host.check_output("date +%s").strip()
    host.check_output("sleep 1 && systemctl restart sglang.service")
    journal = host.check_output("journalctl -u sglang.service --since @%s -o cat --no-pager", since)
    assert "sglang.service: Deactivated successfully." in journal, journal
    for sign in ("timed out", "Processes still around", "Failed with result"):
        assert sign not in journal, journal
    host.check_output(HEALTHY_AGAIN)


def test_secrets_only_in_the_environment_file(node):
    host = node[1]
    unit = host.file(UNIT).content_string
    show = host.check_output("systemctl show sglang.service")
    cat = host.check_output("systemctl cat sglang.service")
    for secret in SECRETS:
        assert secret not in unit and secret not in show and secret not in cat
    # The key reaches the engine through the launcher, not through ExecStart.
    assert "ExecStart=/opt/sglang/current/bin/python %s \\\n" % LAUNCHER in unit
    assert "--api-key" not in unit and "SGLANG_API_KEY" not in show
    env_file = host.check_output("cat %s", ENV_FILE)
    assert 'HF_TOKEN="%s"' % HF_TOKEN in env_file
    assert 'SGLANG_API_KEY="%s"' % API_KEY in env_file


def test_rerun_changes_nothing_and_prints_no_secret():
    proc = run_playbook(CONVERGE, "--diff", "-v")
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-5000:]
    for secret in SECRETS:
        assert secret not in output
    for hostname in EXPECTED_ARGV:
        assert recap(output, hostname)["changed"] == 0


def test_refuses_fusion_on_sm120_with_a_release_that_raises(node):
    name, host = node
    if name != "sglang_service-new":
        pytest.skip("the 0.5.23 node carries the release whose fusion raises on SM120")
    before = _state(host)
    # A new served name would rewrite the unit if the refusal did not stop the run first.
    proc = run_playbook(CONVERGE, "--limit", name,
                        extra_vars={"sglang_service_gpu": SM120_PCIE, "sglang_service_served_model_name": "renamed"})
    assert proc.returncode == 2
    assert failure_message(proc, name) == CRASH_MESSAGE
    assert recap(proc.stdout, name)["changed"] == 0
    assert _state(host) == before


def test_crash_policy_warn_leaves_fusion_out(node):
    name, host = node
    if name != "sglang_service-new":
        pytest.skip("the 0.5.23 node carries the release whose fusion raises on SM120")
    before = _state(host)
    proc = run_playbook(CONVERGE, "--check", "--diff", "--limit", name,
                        extra_vars={"sglang_service_gpu": SM120_PCIE, "sglang_service_crash_policy": "warn"})
    assert proc.returncode == 0, proc.stdout[-5000:]
    assert "sglang_service: WARNING: leaving FlashInfer all-reduce fusion out" in " ".join(proc.stdout.split())
    assert "-    --flashinfer-allreduce-fusion-backend auto \\" in proc.stdout
    assert _state(host) == before


def test_crash_policy_force_deploys_as_asked(node):
    name, host = node
    if name != "sglang_service-new":
        pytest.skip("the 0.5.23 node carries the release whose fusion raises on SM120")
    proc = run_playbook(CONVERGE, "--check", "--diff", "--limit", name,
                        extra_vars={"sglang_service_gpu": SM120_PCIE, "sglang_service_crash_policy": "force"})
    assert proc.returncode == 0, proc.stdout[-5000:]
    assert "sglang_service: WARNING" not in proc.stdout
    assert recap(proc.stdout, name)["changed"] == 0


def test_refuses_a_flag_the_release_does_not_have(node):
    name, host = node
    if name != "sglang_service-old":
        pytest.skip("the 0.5.8 node lacks a flag of a newer release")
    before = _state(host)
    # A flag of 0.5.23 that 0.5.8 does not have (the role's own flags are refused earlier, by
    # name: test_settings.py).
    proc = run_playbook(CONVERGE, "--limit", name,
                        extra_vars={"sglang_service_extra_args": ["--enable-http2"]})
    assert proc.returncode == 2
    assert failure_message(proc, name) == (
        "sglang_service: SGLang 0.5.8 installed in /opt/sglang/current has no "
        "--enable-http2; nothing was written. Remove or rename it "
        "(sglang_service_extra_args and the sglang_service_* feature switches), or install a "
        "release that has it."
    )
    assert _state(host) == before


# A stand-in for GPUs whose NCCL all-reduce hangs (no GPU exists here): a torch package whose
# import never returns, put first on the smoke test's PYTHONPATH. The smoke test's own hard
# timeout then kills it, as it would kill an all-reduce stuck behind the IOMMU or PCIe ACS.
# Outside /tmp and /var/tmp, which the smoke test's sandbox makes private: where the service
# account can read them.
HANGING_TORCH = "/usr/local/lib/hanging-torch"
NCCL_RECORD = "/etc/sglang/nccl-smoke.json"


@contextmanager
def standin_torch(host, directory, source, *leftovers):
    """A torch package whose __init__ is source, under directory, while the block runs (a stand-in:
    no GPU exists here); then it is removed, and the leftovers with it."""
    host.run_expect([0], f"mkdir -p {directory}/torch && printf '%s\\n' {shlex.quote(source)} > {directory}/torch/__init__.py")
    try:
        yield
    finally:
        host.run("rm -rf " + " ".join([directory, *leftovers]))


def test_gpus_that_cannot_all_reduce_stop_the_restart_and_put_the_unit_back(node):
    name, host = node
    if name != "sglang_service-old":
        pytest.skip("one node is enough: the path through deploy.yml is the same on both")
    pid = host.check_output("systemctl show -p MainPID --value sglang.service")
    before = _state(host)
    with standin_torch(host, HANGING_TORCH, "import time; time.sleep(3600)"):
        # A new served name rewrites the unit: a restart is pending, so auto runs the test (the
        # node has 4 GPUs), and its failure must leave the running server and its unit alone.
        proc = run_playbook(CONVERGE, "--limit", name, extra_vars={
            "sglang_service_served_model_name": "renamed",
            "sglang_service_nccl_smoke_timeout": 5,
            "sglang_service_nccl_smoke_environment": {"PYTHONPATH": HANGING_TORCH}})
    assert proc.returncode == 2, proc.stdout[-5000:]
    # The smoke test's own failure, then the rescue that put the files back and failed the host.
    message = failure_message(proc, name)
    assert message.startswith("the NCCL all-reduce did not finish within 5 s and was killed (a hang). Likely causes: ")
    assert message.endswith("sglang was not restarted.")
    assert ("('Fail the host when its GPUs cannot all-reduce' failed; sglang.service was not restarted, and "
            "the link and files were put back as the rollback record kept them)"
            in " ".join((proc.stdout + proc.stderr).split()))
    assert ("TASK [blackwell.sglang.sglang_service : Put back the release, unit, launcher and TP record "
            "the node served with]") in proc.stdout
    assert host.run("test -e /var/lib/blackwell-sglang/rollback").rc == 1
    assert host.check_output("systemctl show -p MainPID --value sglang.service") == pid
    after = _state(host)
    # Contents and launches as before; the unit was written and put back, so its mtime moved.
    assert (after[0], after[2], after[4], after[6]) == (before[0], before[2], before[4], before[6])
    assert "--served-model-name kimi-k2.5" in host.file(UNIT).content_string
    # The failed test is what the node's record says, for the drift report of later checks.
    record = json.loads(host.file(NCCL_RECORD).content_string)
    assert (record["ran"], record["passed"]) == (True, False)
    assert record["msg"].startswith("the NCCL all-reduce did not finish within 5 s and was killed (a hang). Likely causes: ")
    # Without the stand-in the next converge runs the test again before the restart its
    # put-back files call for (this venv has no torch: skipped with its message), and then a
    # converge with nothing to restart leaves the test out.
    proc = run_playbook(CONVERGE, "--limit", name)
    assert proc.returncode == 0, proc.stdout[-5000:]
    proc = run_playbook(CONVERGE, "--limit", name)
    assert proc.returncode == 0, proc.stdout[-5000:]
    assert recap(proc.stdout, name)["changed"] == 0
    assert "NCCL smoke test skipped" not in proc.stdout
    assert "cannot import torch" in json.loads(host.file(NCCL_RECORD).content_string)["msg"]


# A stand-in torch (no GPU exists here) that writes down the NCCL setting its process was given,
# then fails to import: the smoke test reports torch missing and the restart goes on, which leaves
# the file as the proof of what environment the test ran with.
NCCL_ENV_TORCH = "/usr/local/lib/nccl-env-torch"
# In the service's home, the one place its sandbox lets it write.
NCCL_ENV_SEEN = "/var/lib/sglang/nccl-env-seen"


def test_the_nccl_environment_reaches_the_engine_and_the_smoke_test(node):
    name, host = node
    if name != "sglang_service-old":
        pytest.skip("one node is enough: the environment is spelt the same on both")
    source = "\n".join(["import os", f"open('{NCCL_ENV_SEEN}', 'w').write(os.environ.get('NCCL_P2P_DISABLE', 'unset'))",
                        "raise ImportError('stand-in torch')"])
    with standin_torch(host, NCCL_ENV_TORCH, source, NCCL_ENV_SEEN):
        # The scenario's own PYTHONPATH (the stand-in engine) with the stand-in torch after it.
        proc = run_playbook(CONVERGE, "--limit", name, extra_vars={
            "sglang_service_nccl_environment": {"NCCL_P2P_DISABLE": "1"},
            "sglang_service_environment": {"PYTHONPATH": f"/usr/local/lib/sglang-standin:{NCCL_ENV_TORCH}"}})
        assert proc.returncode == 0, proc.stdout[-5000:]
        # The unit changed, so the engine restarted, the smoke test first (4 GPUs, auto).
        assert host.file(NCCL_ENV_SEEN).content_string == "1"
        assert records(host, LAUNCHES)[-1]["environ"]["NCCL_P2P_DISABLE"] == "1"
        assert 'Environment="NCCL_P2P_DISABLE=1"' in host.file(UNIT).content_string.splitlines()
        # Anything but an NCCL_ variable is refused by name, before anything changes.
        before = _state(host)
        proc = run_playbook(CONVERGE, "--limit", name, extra_vars={
            "sglang_service_nccl_environment": {"CUDA_VISIBLE_DEVICES": "0"}})
        assert proc.returncode == 2
        assert ("sglang_service_nccl_environment: 'CUDA_VISIBLE_DEVICES' is not an NCCL variable (NCCL_...); set "
                "other variables in sglang_service_environment.") in failure_message(proc, name)
        assert _state(host) == before
    # Back to the scenario's settings: the variable gone from the unit, the engine restarted.
    proc = run_playbook(CONVERGE, "--limit", name)
    assert proc.returncode == 0, proc.stdout[-5000:]
    assert "NCCL_P2P_DISABLE" not in host.file(UNIT).content_string


# Where a .pth file planted in a release leaves its marks: in the service's home, the one place its
# sandbox may write (root may write anywhere), one file named by the uid of each process that
# started the release's Python.
PTH_MARKS = "/var/lib/sglang/pth-marks"


def test_a_releases_code_never_runs_as_root_before_its_gate(node):
    """A .pth file in the release's site-packages runs in every Python started from that venv.
    Planted there, and a restart asked for (a new served name: the NCCL smoke test runs first,
    then the engine), its marks name the service account only: the smoke test ran the release's
    Python as that account, in a transient unit with the engine's sandbox, never as root."""
    name, host = node
    if name != "sglang_service-old":
        pytest.skip("one node is enough: the smoke test runs the same way on both")
    site = host.check_output("ls -d /opt/sglang/current/lib/python3*/site-packages")
    pth = f"{site}/zz-pth-mark.pth"
    source = f"import os; open('{PTH_MARKS}/uid-%d' % os.getuid(), 'a').close()"
    host.run_expect([0], f"install -d -m 1777 {PTH_MARKS} && printf '%s\\n' {shlex.quote(source)} > {pth}")
    try:
        proc = run_playbook(CONVERGE, "--limit", name, extra_vars={"sglang_service_served_model_name": "marked"})
        assert proc.returncode == 0, proc.stdout[-5000:]
        # The smoke test ran (its task's first result line for the node is not a skip).
        task = proc.stdout.split("TASK [blackwell.sglang.sglang_service : Run the NCCL all-reduce smoke test with"
                                 " the venv's torch]", 1)[1]
        outcome = next(line for line in task.splitlines() if line.startswith(("ok:", "skipping:", "fatal:")))
        assert outcome.startswith(f"ok: [{name}]"), task[:2000]
        marks = host.check_output(f"ls {PTH_MARKS}").split()
        uid = host.check_output("id -u sglang").strip()
        assert "uid-0" not in marks, marks
        assert f"uid-{uid}" in marks, marks
    finally:
        host.run(f"rm -rf {pth} {PTH_MARKS}")
        # Back to the scenario's settings, with the release as it was: the engine restarted.
        proc = run_playbook(CONVERGE, "--limit", name)
    assert proc.returncode == 0, proc.stdout[-5000:]


# What the last smoke test left on a node, as the real payload reported it on a host with two
# H200s (tests/fixtures/nccl/ubuntu2404-h200x2/direct.stdout): torch 2.11.0+cu130 with NCCL 2.28.9.
RECORDED_NCCL = json.loads((Path(os.environ["MOLECULE_PROJECT_DIRECTORY"]) / "tests" / "fixtures" / "nccl"
                            / "ubuntu2404-h200x2" / "direct.stdout").read_text())


def test_a_check_notes_an_old_nccl_on_compute_capability_12_from_the_nodes_record(monkeypatch, tmp_path):
    """A check does not run the smoke test again: sglang_service_info reads the node's record and
    judges the NCCL it names against the node's GPUs. The old node (compute capability 12) gets the
    nccl_version note naming NVIDIA/nccl#2418 and the remedy; the new one (9) gets none; both stay
    ok, with nothing to change. The notes reach the drift report through its one channel."""
    record = {"ran": True, "passed": True, "msg": "2 GPUs", "nccl": RECORDED_NCCL["nccl"], "world_size": 2,
              "busbw_gbps": RECORDED_NCCL["results"][-1]["busbw_gbps"]}
    before = {}
    for name in NODES:
        host = lab_host(name)
        before[name] = host.file(NCCL_RECORD).content_string if host.file(NCCL_RECORD).exists else None
        host.check_output("printf '%%s\\n' %s > %s", json.dumps(record), NCCL_RECORD)
    report_path = tmp_path / "drift.json"
    monkeypatch.setenv("ANSIBLE_CALLBACKS_ENABLED", "blackwell.sglang.drift_report")
    monkeypatch.setenv("BLACKWELL_DRIFT_REPORT_JSON", str(report_path))
    try:
        check = run_playbook(CONVERGE, "--check")
        assert check.returncode == 0, check.stdout[-5000:]
        hosts = json.loads(report_path.read_text())["hosts"]
        old, new = hosts["sglang_service-old"], hosts["sglang_service-new"]
        assert (old["status"], new["status"], old["drift"], new["drift"]) == ("ok", "ok", [], [])
        assert old["notes"]["nccl_smoke"] == ["passed: 297.2 GB/s bus bandwidth over 2 GPUs"]
        [finding] = old["notes"]["nccl_version"]
        assert finding.startswith("NCCL 2.28.9, which the release's torch loads, is older than 2.31.2")
        assert "(NVIDIA/nccl#2418)" in finding and "sglang_install's NCCL floor (sglang_install_nccl_floor_policy" in finding
        assert "nccl_version" not in new["notes"]
    finally:
        for name, content in before.items():
            host = lab_host(name)
            if content is None:
                host.check_output("rm -f %s", NCCL_RECORD)
            else:
                host.check_output("printf '%%s' %s > %s", content, NCCL_RECORD)


STANDIN_CONFIG = "/etc/sglang-standin/config.json"
LOADING_NOTE = "[WARNING]: note: sglang.service has been loading for "


def _restart_outside_ansible(host, config):
    """The stand-in told how to start (a model that takes config's health_delay to load, or never
    loads), then restarted with systemctl, as systemd or an operator restarts it; returns the
    launches recorded before."""
    host.check_output("echo %s > %s", json.dumps(config), STANDIN_CONFIG)
    launches = len(records(host, LAUNCHES))
    host.check_output("systemctl restart sglang.service")
    return launches


def test_an_engine_still_loading_is_waited_for_not_restarted():
    """Restarted outside Ansible, the engine answers 503 for 40 s (its model loading), within
    the scenario's 60 s sglang_service_health_timeout. A check during the load notes it and
    reports nothing to change; a converge during the load notes it, waits for /health and
    passes without restarting it."""
    name = "sglang_service-old"
    host = lab_host(name)
    original = host.file(STANDIN_CONFIG).content_string
    try:
        launches = _restart_outside_ansible(host, {"mode": "serve", "health_delay": 40})
        check = run_playbook(CONVERGE, "--check", "--limit", name)
        assert check.returncode == 0, check.stdout[-5000:]
        assert LOADING_NOTE in check.stdout + check.stderr, check.stdout[-5000:]
        assert recap(check.stdout, name)["changed"] == 0
        assert "restart sglang:" not in check.stdout

        proc = run_playbook(CONVERGE, "--limit", name)
        output = proc.stdout + proc.stderr
        assert proc.returncode == 0, output[-5000:]
        assert LOADING_NOTE in output, output[-5000:]
        assert "TASK [blackwell.sglang.sglang_service : Wait for sglang, still loading its model, to answer /health]" in output
        assert recap(proc.stdout, name)["changed"] == 0
        # The one launch is the restart outside Ansible; it answered 200 before the run ended.
        assert len(records(host, LAUNCHES)) == launches + 1
        assert records(host, HEALTHY)[-1]["pid"] == records(host, LAUNCHES)[-1]["pid"]
    finally:
        host.check_output("echo %s > %s", original.strip(), STANDIN_CONFIG)


def test_an_engine_that_never_finishes_loading_is_restarted_once_then_fails():
    """The engine never answers 200 (sglang_service_health_timeout 20 s here): the converge waits
    the rest of the 20 s, restarts it once behind the health gate, and fails the host when the
    gate fails too (nothing of this run to roll back to). A converge with a loading engine put
    right afterwards heals the node."""
    name = "sglang_service-old"
    host = lab_host(name)
    original = host.file(STANDIN_CONFIG).content_string
    try:
        launches = _restart_outside_ansible(host, {"mode": "unhealthy"})
        proc = run_playbook(CONVERGE, "--limit", name, extra_vars={"sglang_service_health_timeout": 20})
        output = proc.stdout + proc.stderr
        assert proc.returncode == 2, output[-5000:]
        assert LOADING_NOTE in output, output[-5000:]
        assert len(records(host, LAUNCHES)) == launches + 2
        assert failure_message(proc, name).startswith(
            f"sglang_service: sglang.service on {name} did not become healthy within 20s (/health: 503);"
            " the rollout stops here.")
    finally:
        host.check_output("echo %s > %s", original.strip(), STANDIN_CONFIG)
    # The engine the failed gate left answers 503 still: the heal does not wait out the
    # scenario's 60 s for it.
    healed = run_playbook(CONVERGE, "--limit", name, extra_vars={"sglang_service_health_timeout": 10})
    assert healed.returncode == 0, healed.stdout[-5000:]
    assert recap(healed.stdout, name)["changed"] > 0
    assert host.check_output("systemctl is-active sglang.service") == "active"


# --- generated tamper matrix: every row of sglang_service's table, and the service's states ----

# How each kind of row is put off on a converged node, as root; a row the role keeps as it finds
# it (the Hugging Face home) is removed instead.
TAMPER = {
    "file": "printf '# tampered\\n' >> {path}",
    "directory": "chmod 0700 {path}",
    "link": "ln -sfn /opt/sglang/releases/elsewhere {path}",
    "keep": "rm -rf {path}",
}
SERVICE_ROLE = "blackwell.sglang.sglang_service : "
RESTART_FOR_STATE = SERVICE_ROLE + "Restart sglang to load what changed under it, or to recover its health"
START = SERVICE_ROLE + "Enable and start sglang"
DROPINS = SERVICE_ROLE + "Remove drop-ins that change the unit"
SECRETS_TASK = SERVICE_ROLE + "Write the secrets file"
RESTART_HANDLER = SERVICE_ROLE + "Restart sglang"
# The states of the service the plan reads, each put off outside Ansible, with the tasks a check
# reports for it.
STATES = [
    ("stopped", "systemctl stop sglang.service", [START]),
    ("disabled", "systemctl disable sglang.service", [START]),
    ("a drop-in", "mkdir -p /etc/systemd/system/sglang.service.d && printf '[Service]\\nNice=5\\n'"
     " > /etc/systemd/system/sglang.service.d/tamper.conf && systemctl daemon-reload", [DROPINS]),
]
# Everything the role manages or that tells its state, byte for byte.
SNAPSHOT = ("find /etc/sglang /usr/local/lib/blackwell-sglang /etc/systemd/system /opt/sglang /var/lib/sglang"
            " /var/lib/blackwell-sglang -xdev -printf '%p %y %m %u %g %l\\n' 2>/dev/null | sort;"
            " find /etc/sglang /usr/local/lib/blackwell-sglang /etc/systemd/system -xdev -type f -print0 | sort -z"
            " | xargs -0 sha256sum; systemctl show -p ActiveState,UnitFileState,DropInPaths,MainPID sglang.service")


def _json_playbook(monkeypatch, *args):
    """The scenario's converge with the JSON callback: the report. The release to deploy is the
    one the active-release link already names, so that the link's row is in force."""
    monkeypatch.setenv("ANSIBLE_STDOUT_CALLBACK", "ansible.posix.json")
    monkeypatch.delenv("ANSIBLE_CALLBACKS_ENABLED", raising=False)
    proc = run_playbook(CONVERGE, *args, "-e", "sglang_service_release_path=/opt/sglang/releases/{{ lab_sglang_version }}")
    assert proc.returncode == 0, proc.stdout[-20000:] + proc.stderr[-3000:]
    return json.JSONDecoder().raw_decode(proc.stdout[proc.stdout.index("{"):])[0]


def _outcome(report, host, secret_paths):
    """The table's paths the role's looped tasks changed (or would change) on host, and the other
    tasks that changed there, but for the restart handler, which follows any of them. The secrets
    file's task hides its items (no_log): its change is its rows' paths."""
    paths, others = [], []
    for play in report["plays"]:
        for task in play["tasks"]:
            name = task["task"]["name"]
            result = task["hosts"].get(host, {})
            results = result.get("results") if isinstance(result.get("results"), list) else []
            rows = [item for item in results if isinstance(item.get("item"), dict) and "path" in item["item"]]
            if rows:
                paths += [item["item"]["path"] for item in rows if item.get("changed")]
            elif name == SECRETS_TASK:
                paths += secret_paths if result.get("changed") else []
            elif result.get("changed") and name != RESTART_HANDLER:
                others.append(name)
    return paths, others


def test_every_row_of_the_table_and_every_state_tampered_alone_is_reported_then_healed(monkeypatch):
    """The table comes from the plan a check publishes (sglang_service_plan.table, vars/main.yml's
    __sglang_service_files as each node's settings make it): a row added there is tampered with
    here without a new test. Two entries per round, one on each node: a check reports exactly that
    row (and, for a row the server starts from, the restart the state read calls for) or exactly
    the tasks of that state, and changes no byte on any node; a converge heals it; a last converge
    changes nothing."""
    report = _json_playbook(monkeypatch, "--check")
    plans = {}
    for play in report["plays"]:
        for task in play["tasks"]:
            for name in NODES:
                facts = task["hosts"].get(name, {}).get("ansible_facts", {})
                if "sglang_service_plan" in facts:
                    plans[name] = facts["sglang_service_plan"]
    assert sorted(plans) == sorted(NODES) and all(plan["steps"] == [] for plan in plans.values()), plans
    entries = []
    secrets = {name: [row["path"] for row in plans[name]["table"] if row.get("secret")] for name in NODES}
    for name in NODES:
        table = plans[name]["table"]
        assert {row["state"] for row in table} == {"file", "directory", "link"}, table
        for row in table:
            kind = "keep" if row.get("keep") else row["state"]
            expected = ([row["path"]], [RESTART_FOR_STATE] if row.get("restart") else [])
            entries.append((name, row["path"], TAMPER[kind].format(path=row["path"]), expected))
        entries += [(name, state, command, ([], tasks)) for state, command, tasks in STATES]
    # One entry of each node per round.
    rounds = [[entry for entry in entries if entry[0] == name] for name in NODES]
    assert len({len(entries_of_node) for entries_of_node in rounds}) == 1, rounds
    problems = []
    for batch in zip(*rounds):
        for name, _what, command, _expected in batch:
            lab_host(name).check_output(command)
        before = {name: lab_host(name).check_output(SNAPSHOT) for name in NODES}
        check = _json_playbook(monkeypatch, "--check", "--diff")
        for name, what, _command, expected in batch:
            seen = _outcome(check, name, secrets[name])
            if seen != expected:
                problems.append(f"{name}: check with {what} tampered: {seen}, not {expected}")
        for name in NODES:
            if lab_host(name).check_output(SNAPSHOT) != before[name]:
                problems.append(f"{name}: the check with {[entry[1] for entry in batch]} tampered changed the node")
        converge = _json_playbook(monkeypatch)
        for name, what, _command, expected in batch:
            seen = _outcome(converge, name, secrets[name])
            if seen[0] != expected[0]:
                problems.append(f"{name}: converge with {what} tampered: {seen}")
    assert problems == [], "\n".join(problems)
    again = _json_playbook(monkeypatch)
    assert {name: again["stats"][name]["changed"] for name in NODES} == {name: 0 for name in NODES}
    for name in NODES:
        assert lab_host(name).check_output("systemctl is-active sglang.service") == "active"
