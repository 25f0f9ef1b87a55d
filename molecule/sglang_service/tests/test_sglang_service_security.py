"""The secure defaults of the sglang_service role on the two lab nodes: the API key kept out of
the journal, argv, `systemctl show` and Ansible's output; no API open to the network without a
key; the sandboxed unit, its systemd-analyze exposure score, and the stand-in healthy under it.

What the engine logs here is the stand-in's imitation of SGLang's start-up logging
(tests/lab/sglang_standin/engine_logging.py), not SGLang's own `ServerArgs`: importing
`sglang.srt.server_args` imports torch in 0.5.8, 0.5.18 and 0.5.23, and with it transformers
(`sglang.srt.utils.hf_transformers_utils`) and triton (the FLA kernels it takes a chunk size
from). PyPI's torch is a CUDA build that loads gigabytes of NVIDIA libraries at import, which the
lab's nodes cannot hold; a CPU-only torch is not on PyPI, and a stub torch would test the stub. The
imitation logs the key the same way (repr of the arguments at INFO, after
`logging.basicConfig(force=True)`, in the main process and in a spawned child), and
`test_installed_release_logs_its_server_args` checks in each node's real wheel that the release
does log them.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from labtools import HEALTHY, LAUNCHES, failure_message, lab_host, records, recap, run_playbook

CONVERGE = Path(os.environ["MOLECULE_SCENARIO_DIRECTORY"]) / "converge.yml"
README = Path(os.environ["MOLECULE_PROJECT_DIRECTORY"]) / "roles" / "sglang_service" / "README.md"
UNIT = "/etc/systemd/system/sglang.service"
ENV_FILE = "/etc/sglang/sglang.env"
LAUNCHER = "/usr/local/lib/blackwell-sglang/sglang_launch.py"
API_KEY = "sk-labSECRETkey93ab"
ROTATED_KEY = "sk-labROTATEDkey4e27"
HF_TOKEN = "hf_labSECRETtoken5d1f"
NODES = ["sglang_service-old", "sglang_service-new"]
SITE_PACKAGES = "/opt/sglang/current/lib/python3.11/site-packages"
# The statement each release's engine.py logs its server arguments with, key included.
ENGINE_LOGGING = {
    "sglang_service-old": 'logger.info(f"{server_args=}")',  # 0.5.8
    "sglang_service-new": 'logger.info(f"server_args={_server_args_for_logging(server_args)}")',  # 0.5.23
}
OPEN_API_MESSAGE = (
    "sglang_service: refusing to listen on 0.0.0.0:30000 without an API key: anyone who reaches "
    "that address could use the GPUs. Set sglang_service_api_key, listen on loopback "
    "(sglang_service_host: 127.0.0.1), or set sglang_service_allow_unauthenticated: true if only "
    "trusted clients can reach it; nothing was written."
)
# Every process of the service user, with its exec argv as the kernel keeps it.
PROCESSES = r"""
import json, os, pwd
uid = pwd.getpwnam("sglang").pw_uid
out = {}
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        if os.stat("/proc/" + pid).st_uid == uid:
            out[pid] = open("/proc/%s/cmdline" % pid, "rb").read().decode(errors="replace").split("\0")
    except FileNotFoundError:
        pass
print(json.dumps(out))
"""


@pytest.fixture(params=NODES)
def node(request):
    return request.param, lab_host(request.param)


def _state(host):
    return tuple(
        (host.file(path).sha256sum, host.file(path).mtime) for path in (UNIT, ENV_FILE, LAUNCHER)
    ) + (len(records(host, LAUNCHES)),)


def _journal(host):
    """The whole journal of the node, every field of every entry."""
    return host.check_output("journalctl --no-pager --all -o export")


def _main_pid(host):
    return host.check_output("systemctl show -p MainPID --value sglang.service").strip()


def test_installed_release_logs_its_server_args(node):
    name, host = node
    engine = host.file(SITE_PACKAGES + "/sglang/srt/entrypoints/engine.py").content_string
    assert ENGINE_LOGGING[name] in engine


def _assert_key_hidden(host, secrets, since):
    """None of the secrets in the journal, `systemctl show` or any argv of the service user's
    processes; the engine's start-up logging since `since`, main process and spawned child, in
    the journal with the key masked."""
    journal = _journal(host)
    show = host.check_output("systemctl show sglang.service")
    processes = json.loads(host.check_output("python3 -c %s", PROCESSES))
    main_pid = _main_pid(host)
    assert main_pid in processes and len(processes) >= 2, processes  # the engine and its spawned child
    release = host.check_output("readlink /opt/sglang/current")
    assert processes[main_pid][:2] == [f"{release}/bin/python", LAUNCHER]
    for secret in secrets:
        assert secret not in journal
        assert secret not in show
        for argv in processes.values():
            assert secret not in " ".join(argv)
    logged = host.check_output("journalctl --no-pager -o cat -u sglang.service --since @%s", str(int(since) - 1))
    assert "server_args=ServerArgsImitation(fields={'model_path': '/models/Kimi-K2.5'," in logged
    assert re.search(r"\] server_args=ServerArgsImitation\(.*'api_key': '<redacted>'\}\)", logged)
    assert re.search(r"scheduler child: server_args=ServerArgsImitation\(.*'api_key': '<redacted>'\}\)", logged)


def test_key_never_shows(node):
    host = node[1]
    launch = records(host, LAUNCHES)[-1]
    # In-process only: the engine's sys.argv holds the key, the kernel's argv does not.
    assert launch["argv"][-2:] == ["--api-key", API_KEY]
    _assert_key_hidden(host, (API_KEY, HF_TOKEN), launch["time"])


def test_key_rotated_at_vvv_never_shows():
    """A new key, deployed at -vvv, restarts the engine with it; neither key shows in Ansible's
    output or on the node. One node: the launcher is the same for every release. The new key
    comes as a vault block scalar gives it, with a line break at its end: the engine gets the key
    without it, and the secrets file holds one line for it. The original key is restored
    afterwards."""
    name = "sglang_service-new"
    host = lab_host(name)
    launches = len(records(host, LAUNCHES))
    proc = run_playbook(CONVERGE, "-vvv", "--limit", name, extra_vars={"sglang_service_api_key": ROTATED_KEY + "\n"})
    try:
        output = proc.stdout + proc.stderr
        assert proc.returncode == 0, output[-5000:]
        assert recap(proc.stdout, name)["changed"] > 0
        assert len(records(host, LAUNCHES)) > launches
        launch = records(host, LAUNCHES)[-1]
        assert launch["argv"][-2:] == ["--api-key", ROTATED_KEY]
        secrets_file = host.file(ENV_FILE).content_string.splitlines()
        assert [line for line in secrets_file if not line.startswith("#")] == [
            f'HF_TOKEN="{HF_TOKEN}"', f'SGLANG_API_KEY="{ROTATED_KEY}"']
        for secret in (ROTATED_KEY, API_KEY, HF_TOKEN):
            assert secret not in output
        _assert_key_hidden(host, (ROTATED_KEY, API_KEY, HF_TOKEN), launch["time"])
    finally:
        restored = run_playbook(CONVERGE, "--limit", name)
        assert restored.returncode == 0, restored.stdout[-5000:]


def test_refuses_an_open_api_without_a_key(node):
    name, host = node
    before = _state(host)
    proc = run_playbook(CONVERGE, "--limit", name, extra_vars={"sglang_service_api_key": ""})
    assert proc.returncode == 2
    assert failure_message(proc, name) == OPEN_API_MESSAGE
    assert recap(proc.stdout, name)["changed"] == 0
    assert _state(host) == before


@pytest.mark.parametrize("ways_out", [
    {"sglang_service_allow_unauthenticated": True},
    {"sglang_service_host": "127.0.0.1"},
], ids=["trusted-network", "loopback"])
def test_no_key_is_accepted_on_loopback_or_when_trusted(ways_out):
    name = "sglang_service-old"
    host = lab_host(name)
    before = _state(host)
    proc = run_playbook(CONVERGE, "--check", "--limit", name,
                        extra_vars=dict(ways_out, sglang_service_api_key=""))
    assert proc.returncode == 0, proc.stdout[-5000:]
    assert "refusing to listen" not in proc.stdout
    assert _state(host) == before


def _mounts(host, pid):
    """Mount point -> (root of the mount in its file system, options), as process pid sees them."""
    mounts = {}
    for line in host.check_output("cat /proc/%s/mountinfo", pid).splitlines():
        fields = line.split()
        mounts[fields[4]] = (fields[3], fields[5].split(","))
    return mounts


def test_engine_runs_sandboxed_and_healthy(node):
    host = node[1]
    pid = _main_pid(host)
    status = dict(line.split(":", 1) for line in host.check_output("cat /proc/%s/status", pid).splitlines())
    assert status["NoNewPrivs"].strip() == "1"
    assert status["CapBnd"].strip() == "0000000000000000"
    mounts = _mounts(host, pid)
    assert "ro" in mounts["/"][1]
    assert "rw" in mounts["/var/lib/sglang"][1]
    # A /tmp of its own, and the shared memory NCCL needs.
    assert "systemd-private-" in mounts["/tmp"][0] and "rw" in mounts["/tmp"][1]
    assert "rw" in mounts["/dev/shm"][1]
    # Every device node (/dev/nvidia*, nvidia-uvm, nvidia-caps) and /proc/driver/nvidia stay
    # reachable: no device sandbox and no /proc subset, whatever systemd's defaults become
    # (systemctl show leaves DeviceAllow out when the list is empty).
    show = host.check_output("systemctl show -p PrivateDevices -p DevicePolicy -p DeviceAllow -p ProcSubset sglang.service")
    assert dict(line.split("=", 1) for line in show.splitlines()) == {
        "PrivateDevices": "no", "DevicePolicy": "auto", "ProcSubset": "all"}
    assert records(host, HEALTHY), "the stand-in never answered /health under the sandboxed unit"
    health = host.run("python3 -c \"import urllib.request as u; print(u.urlopen('http://127.0.0.1:30000/health').status)\"")
    assert health.stdout.strip() == "200", health.stderr


HF_HOME = "/var/lib/sglang/.cache/huggingface"
DRAFT_MODEL = "/var/lib/sglang/models/Kimi-K2.5-eagle3"


def _as_the_engine(name, pid, script, path):
    """Run script (path as $0) as the service account in the engine's own mount namespace: what
    the engine itself could do. Entering another process's namespace needs ptrace rights, which
    only a privileged exec into the node has; nsenter drops them with root."""
    enter = 'exec nsenter -t "$0" -m -S "$(id -u sglang)" -G "$(id -g sglang)" -- sh -c "$1" "$2"'
    return subprocess.run(["podman", "exec", "--privileged", name, "sh", "-c", enter, pid, script, path],
                          capture_output=True, text=True, check=False)


def _write_as_the_engine(name, pid, path):
    return _as_the_engine(name, pid, 'mkdir -p "$(dirname "$0")" && echo "print(1)" >"$0"', path)


def test_engine_cannot_write_the_code_of_its_next_start(node):
    """The modules trust_remote_code imports go to the private /tmp; the Hugging Face home and the
    model directories are read-only to the engine, though the home around them is writable."""
    name, host = node
    pid = _main_pid(host)
    environ = records(host, LAUNCHES)[-1]["environ"]
    assert (environ["HF_MODULES_CACHE"], environ["HF_HUB_OFFLINE"]) == ("/tmp/hf_modules", "1")
    home = host.file(HF_HOME)
    assert (home.is_directory, home.user, home.group, home.mode) == (True, "sglang", "sglang", 0o750)
    mounts = _mounts(host, pid)
    # Inside the writable home, each a read-only mount of its own (the model under /models is on
    # the read-only system already, where systemd adds no mount).
    for path in (HF_HOME, DRAFT_MODEL):
        assert "ro" in mounts.get(path, ("", []))[1], (path, sorted(mounts))
    for path in (HF_HOME + "/modules/transformers_modules/kimi/modeling.py",
                 HF_HOME + "/hub/models--moonshotai--Kimi-K2.5/snapshots/main/modeling.py",
                 "/models/Kimi-K2.5/modeling_extra.py", DRAFT_MODEL + "/modeling_extra.py"):
        result = _write_as_the_engine(name, pid, path)
        assert result.returncode != 0 and "Read-only file system" in result.stderr, (path, result.stderr)
    # Nor can it move the read-only trees aside to put its own in their place: each directory
    # between them and the writable home is a mount point, which rename(2) refuses.
    for path in ("/var/lib/sglang/.cache", "/var/lib/sglang/models", HF_HOME, DRAFT_MODEL):
        result = _as_the_engine(name, pid, 'mv "$0" "$0.moved"', path)
        assert result.returncode != 0 and "Device or resource busy" in result.stderr, (path, result.stderr)
        assert host.file(path).is_directory and not host.file(path + ".moved").exists, path
    # The same writer succeeds where the engine may write: the kernel caches, also beside the
    # Hugging Face home, and the private /tmp.
    for path in ("/var/lib/sglang/.triton/cache/probe.py", "/var/lib/sglang/.cache/flashinfer/probe.py",
                 "/tmp/hf_modules/transformers_modules/probe.py"):
        result = _write_as_the_engine(name, pid, path)
        assert result.returncode == 0, (path, result.stderr)
    host.run("rm -rf /var/lib/sglang/.triton /var/lib/sglang/.cache/flashinfer")
    assert host.run("test -e %s", HF_HOME + "/modules").rc == 1


def test_a_missing_hugging_face_home_is_drift_and_made_again():
    name = "sglang_service-old"
    host = lab_host(name)
    host.run("rm -rf %s", HF_HOME)
    check = run_playbook(CONVERGE, "--check", "--limit", name)
    assert check.returncode == 0, check.stdout[-5000:]
    assert recap(check.stdout, name)["changed"] == 1
    assert ("TASK [blackwell.sglang.sglang_service : Create the configuration, launcher and Hugging Face directories]"
            in check.stdout)
    assert host.run("test -e %s", HF_HOME).rc == 1
    converge = run_playbook(CONVERGE, "--limit", name)
    assert converge.returncode == 0, converge.stdout[-5000:]
    assert recap(converge.stdout, name)["changed"] == 1
    home = host.file(HF_HOME)
    assert (home.is_directory, home.user, home.mode) == (True, "sglang", 0o750)
    again = run_playbook(CONVERGE, "--limit", name)
    assert recap(again.stdout, name)["changed"] == 0, again.stdout[-5000:]


def test_exposure_score_at_most_the_recorded_one(node):
    host = node[1]
    recorded = re.search(r"rates the unit \*\*([0-9.]+)\*\*", README.read_text())
    assert recorded, "the role README records no exposure score"
    result = host.run("systemd-analyze security --no-pager sglang.service")
    assert result.rc == 0, result.stderr
    score = re.search(r"Overall exposure level for sglang\.service: ([0-9.]+)", result.stdout)
    assert score, result.stdout[-2000:]
    assert float(score.group(1)) <= float(recorded.group(1)), result.stdout
