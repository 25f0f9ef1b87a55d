"""End state of the cuda13 scenario, and the role's check-mode and failure behaviour.

Host tests run on every node through testinfra and assert per group. The tests after them
drive ansible-playbook from the controller against the scenario's own containers: check mode
on converged and on 12.8 nodes, a pin move, and the driver-floor failure on the 12.8 node
through a stand-in nvidia-smi.
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

SCENARIO = Path(__file__).resolve().parent.parent
UPGRADED = ("cuda13-keep", "cuda13-remove")
NVCC13 = "Cuda compilation tools, release 13.0, V13.0.88"


def _only(host, *names):
    if host.backend.get_hostname() not in names:
        pytest.skip("not asserted on this node")


def test_nvcc_through_usr_local_cuda_is_13_0(host):
    _only(host, *UPGRADED)
    out = host.check_output("/usr/local/cuda/bin/nvcc --version")
    assert NVCC13 in out
    assert host.check_output("readlink /usr/local/cuda") == "/etc/alternatives/cuda"
    assert host.check_output("readlink -f /usr/local/cuda") == "/usr/local/cuda-13.0"
    assert host.check_output("readlink -f /usr/local/cuda-13") == "/usr/local/cuda-13.0"


def test_alternatives_point_at_13_0(host):
    _only(host, *UPGRADED)
    query = host.check_output("update-alternatives --query cuda").splitlines()
    assert "Value: /usr/local/cuda-13.0" in query


def test_toolkit_installed_and_held(host):
    _only(host, *UPGRADED)
    assert host.check_output("dpkg --get-selections cuda-toolkit-13-0").split() == ["cuda-toolkit-13-0", "hold"]
    want = "13.0.88-1" if host.backend.get_hostname() == "cuda13-keep" else "13.0.88-2"
    assert host.package("cuda-toolkit-13-0").version == want


def test_repository_is_deb822_with_signed_by(host):
    _only(host, *UPGRADED)
    sources = host.file("/etc/apt/sources.list.d/cuda-debian12-x86_64.sources")
    assert sources.mode == 0o644
    lines = sources.content_string.splitlines()
    assert "URIs: file:///srv/cuda-repo/debian12/x86_64/" in lines
    assert "Signed-By: /etc/apt/keyrings/cuda-archive-keyring.asc" in lines
    assert not host.file("/etc/apt/sources.list.d/cuda-debian12-x86_64.list").exists
    key = host.file("/etc/apt/keyrings/cuda-archive-keyring.asc")
    assert key.content_string.startswith("-----BEGIN PGP PUBLIC KEY BLOCK-----")
    # apt verifies InRelease against that keyring alone: a wrong or missing key is an error
    # (or a warning for a source apt then ignores), so a clean update proves the Signed-By wiring.
    update = host.run("apt-get update")
    assert update.rc == 0 and "W:" not in update.stderr and "E:" not in update.stderr, update.stderr
    assert "/srv/cuda-repo/debian12/x86_64  InRelease" in update.stdout
    policy = host.check_output("apt-cache policy cuda-toolkit-13-0")
    assert "/srv/cuda-repo/debian12/x86_64  Packages" in policy


def test_environment_files(host):
    _only(host, *UPGRADED)
    profile = host.file("/etc/profile.d/cuda13.sh")
    assert (profile.user, profile.group, profile.mode) == ("root", "root", 0o644)
    assert "export CUDA_HOME=/usr/local/cuda\n" in profile.content_string
    linker = host.file("/etc/ld.so.conf.d/cuda13.conf")
    assert (linker.user, linker.group, linker.mode) == ("root", "root", 0o644)
    assert linker.content_string.splitlines()[-1] == "/usr/local/cuda/lib64"
    login = host.check_output("bash -lc 'echo $CUDA_HOME; command -v nvcc'").splitlines()
    assert login == ["/usr/local/cuda", "/usr/local/cuda/bin/nvcc"]


def test_previous_toolkit_kept(host):
    _only(host, "cuda13-keep")
    for pkg in ("cuda-toolkit-12-8", "cuda-nvcc-12-8", "cuda-toolkit-12-8-config-common"):
        assert host.package(pkg).is_installed, pkg
    assert "release 12.8, V12.8.93" in host.check_output("/usr/local/cuda-12.8/bin/ptxas --version")
    assert "/usr/local/cuda-12.8" in host.check_output("update-alternatives --list cuda")


def test_previous_toolkit_removed(host):
    _only(host, "cuda13-remove")
    for pkg in ("cuda-toolkit-12-8", "cuda-nvcc-12-8", "cuda-toolkit-12-8-config-common"):
        assert not host.package(pkg).is_installed, pkg
    assert not host.file("/usr/local/cuda-12.8").exists
    assert host.check_output("update-alternatives --list cuda") == "/usr/local/cuda-13.0"


# --- controller-side: ansible-playbook against the scenario's containers -------------------


def _playbook(*args, playbook="apply.yml"):
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_NOCOLOR="1")
    env.pop("ANSIBLE_CALLBACKS_ENABLED", None)
    proc = subprocess.run(
        ["ansible-playbook", "-i", os.environ["MOLECULE_INVENTORY_FILE"], str(SCENARIO / playbook), *args],
        env=env, capture_output=True, text=True, check=False,
    )
    try:
        report = json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise AssertionError(proc.stdout[-5000:] + proc.stderr[-5000:]) from None
    return proc.returncode, report


def _task_results(report, host):
    """(task name without its role prefix, result) for every task that ran on host, in order."""
    for play in report["plays"]:
        for task in play["tasks"]:
            if host in task["hosts"]:
                yield task["task"]["name"].split(" : ", 1)[-1], task["hosts"][host]


def _changed_tasks(report, host):
    return [name for name, res in _task_results(report, host) if res.get("changed")]


def _snapshot(node):
    """Everything the role could touch on node: files under /etc and /usr/local, dpkg state."""
    script = (
        "find /etc /usr/local -xdev \\( -type f -o -type l \\) -print0 | sort -z"
        " | xargs -0 sha256sum 2>/dev/null; find /etc /usr/local -xdev -type l -printf '%p -> %l\\n' | sort;"
        " dpkg --get-selections; dpkg-query -W -f='${Package} ${Version} ${Status}\\n';"
        " update-alternatives --query cuda 2>&1 || true"
    )
    proc = subprocess.run(["podman", "exec", node, "sh", "-c", script], capture_output=True, text=True, check=True)
    return proc.stdout


# The role's steps after its plan: a converged node passes none of them (meta end_role).
FILES_TASKS = ("Create or remove the role's directories and lists", "Write the role's files")
STEPS = (*FILES_TASKS, "Install or move the toolkit", "Hold the toolkit against unattended upgrades",
         "Select the CUDA toolkit for the links", "Refresh the dynamic linker cache", "Check nvcc reports the CUDA release")
KEYRING = "/etc/apt/keyrings/cuda-archive-keyring.asc"
SOURCES = "/etc/apt/sources.list.d/cuda-debian12-x86_64.sources"
LEGACY = "/etc/apt/sources.list.d/cuda-debian12-x86_64.list"
ENV_FILES = ("/etc/profile.d/cuda13.sh", "/etc/ld.so.conf.d/cuda13.conf")


def _changed_paths(report, host):
    """The paths of the role's table that its two file tasks changed (or would change), in order."""
    return [item["item"]["path"] for name, res in _task_results(report, host) if name in FILES_TASKS
            for item in res.get("results", []) if item.get("changed")]


def test_check_on_converged_nodes_reports_nothing():
    rc, report = _playbook("--check", "--limit", ",".join(UPGRADED))
    assert rc == 0, report["stats"]
    for node in UPGRADED:
        assert report["stats"][node]["changed"] == 0, _changed_tasks(report, node)
        assert report["stats"][node]["failures"] == 0
        names = [name for name, _res in _task_results(report, node)]
        assert "Read the toolkit packages, the CUDA links, nvcc, the repository files and the signing key" in names
        assert [name for name in names if name in STEPS] == [], names


def _exec(node, *argv):
    return subprocess.run(["podman", "exec", node, *argv], capture_output=True, text=True, check=True).stdout


def _give_python3_apt(node):
    """What the role's prerequisites would install, from the lab's Debian mirror."""
    _exec(node, "sh", "-c", "DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-apt")


def test_check_on_a_12_8_node_reports_the_upgrade_and_changes_nothing():
    before = _snapshot("cuda13-fresh")
    rc, report = _playbook("--check", "--diff", "--limit", "cuda13-fresh")
    assert rc == 0, report["stats"]
    changed = _changed_tasks(report, "cuda13-fresh")
    assert "Install the packages the role's apt tasks run on" in changed, changed
    assert _changed_paths(report, "cuda13-fresh") == [LEGACY, KEYRING, SOURCES, *ENV_FILES]
    # A stock node has no python3-apt yet, and apt refuses check mode without it: the install
    # is left unjudged (skipped on ansible_check_mode) rather than failed.
    install = dict(_task_results(report, "cuda13-fresh"))["Install the toolkit package"]
    assert install.get("skipped") is True and "ansible_check_mode" in install["false_condition"], install
    assert _snapshot("cuda13-fresh") == before
    assert "release 12.8" in _exec("cuda13-fresh", "/usr/local/cuda/bin/ptxas", "--version")

    # With its binding, apt judges the install from cuda-keyring's lists: a change.
    _give_python3_apt("cuda13-fresh")
    before = _snapshot("cuda13-fresh")
    rc, report = _playbook("--check", "--diff", "--limit", "cuda13-fresh")
    assert rc == 0, report["stats"]
    changed = _changed_tasks(report, "cuda13-fresh")
    assert "Install the toolkit package" in changed, changed
    assert "Install the packages the role's apt tasks run on" not in changed, changed
    assert _snapshot("cuda13-fresh") == before


def test_pin_change_unholds_moves_and_holds_again():
    rc, report = _playbook("--limit", "cuda13-keep", "-e", "cuda13_toolkit_version=13.0.88-2")
    assert rc == 0, report["stats"]
    changed = _changed_tasks(report, "cuda13-keep")
    assert changed[:3] == ["Release the hold on the toolkit", "Install the toolkit package", "Hold the toolkit after the move"]
    state = subprocess.run(
        ["podman", "exec", "cuda13-keep", "dpkg-query", "-W", "-f=${Version} ${Status}", "cuda-toolkit-13-0"],
        capture_output=True, text=True, check=True).stdout
    assert state == "13.0.88-2 hold ok installed"
    rc, report = _playbook("--limit", "cuda13-keep", "-e", "cuda13_toolkit_version=13.0.88-2")
    assert rc == 0 and report["stats"]["cuda13-keep"]["changed"] == 0, _changed_tasks(report, "cuda13-keep")


def test_driver_below_floor_fails_and_changes_nothing():
    before = _snapshot("cuda13-fresh")
    rc, report = _playbook("--limit", "cuda13-fresh", "-e", "cuda13_nvidia_smi=/usr/local/lib/lab/nvidia-smi")
    assert rc == 2
    failed = [(name, res["msg"]) for name, res in _task_results(report, "cuda13-fresh") if res.get("failed")]
    assert failed == [(
        "Refuse settings and a driver CUDA 13 cannot work with",
        "cuda13: NVIDIA driver 570.133.20 is older than 580.65.06, the minimum for CUDA 13; install an"
        " R580 driver first (or set cuda13_driver_manage: true). Nothing was changed.",
    )]
    assert _snapshot("cuda13-fresh") == before


def test_unreachable_key_url_fails_with_what_to_set_and_changes_nothing():
    # Port 9 on the node's own loopback: nothing listens there, so no HTTP answer comes back.
    # cuda13-keep has the role's prerequisites already; only the key download is in question.
    before = _snapshot("cuda13-keep")
    rc, report = _playbook("--limit", "cuda13-keep", "-e", "cuda13_repo_base_url=http://127.0.0.1:9/",
                           "-e", "cuda13_repo_key_url=")
    assert rc == 2
    failed = [(name, res["msg"]) for name, res in _task_results(report, "cuda13-keep") if res.get("failed")]
    assert failed == [(
        "Refuse a signing key that cannot be fetched or is not the expected one",
        "cuda13: could not download the CUDA repository signing key from"
        " http://127.0.0.1:9/debian12/x86_64/3bf863cc.pub (no connection). Set cuda13_repo_base_url"
        " to a mirror of NVIDIA's repositories that this node reaches, or cuda13_repo_key_url to a"
        " file:// path of the key on the node, or cuda13_repo_key_content to the ASCII-armored key"
        " itself. Nothing was changed.",
    )]
    assert report["stats"]["cuda13-keep"]["changed"] == 0, _changed_tasks(report, "cuda13-keep")
    assert _snapshot("cuda13-keep") == before


def test_check_on_a_node_without_the_repository_leaves_the_install_unjudged():
    legacy = "/etc/apt/sources.list.d/cuda-debian12-x86_64.list"

    def node(*argv):
        return _exec("cuda13-fresh", *argv)

    # apt's binding in place, so that only the missing repository keeps apt from judging.
    _give_python3_apt("cuda13-fresh")
    saved = node("cat", legacy)
    # A node that never had the CUDA repository: no sources for it, and apt's lists forget it.
    node("rm", legacy)
    node("apt-get", "update", "-qq")
    try:
        assert "cuda-toolkit-13-0" not in node("apt-cache", "pkgnames", "cuda-toolkit")
        before = _snapshot("cuda13-fresh")
        rc, report = _playbook("--check", "--diff", "--limit", "cuda13-fresh")
        assert rc == 0, report["stats"]
        assert report["stats"]["cuda13-fresh"]["failures"] == 0
        results = dict(_task_results(report, "cuda13-fresh"))
        changed = _changed_paths(report, "cuda13-fresh")
        assert SOURCES in changed and legacy not in changed, changed
        # apt has no list that names the toolkit and check mode does not refresh them: the
        # install is skipped on ansible_check_mode, which the drift report lists as not judged.
        for task in ("Install the toolkit package", "Check nvcc reports the CUDA release"):
            assert results[task].get("skipped") is True, (task, results[task])
            assert "ansible_check_mode" in results[task]["false_condition"], results[task]
        assert _snapshot("cuda13-fresh") == before
    finally:
        subprocess.run(["podman", "exec", "-i", "cuda13-fresh", "sh", "-c", f"cat > {legacy}"],
                       input=saved, text=True, check=True)
        node("apt-get", "update", "-qq")


# What tools/lab/build-cuda-repo.sh wrote beside this build's key, as the scenario pins it.
LAB_FINGERPRINT = (SCENARIO.parent.parent / ".cache/lab/cuda-repo/debian12/x86_64/cuda-archive-key.fingerprint").read_text().strip()
NVIDIA_FINGERPRINT = "EB693B3035CD5710E231E123A4B469963BF863CC"


def _failures(report, host):
    return [(name, res["msg"]) for name, res in _task_results(report, host) if res.get("failed")]


@pytest.mark.parametrize("check", [False, True], ids=["converge", "check"])
def test_a_key_with_another_fingerprint_is_refused_and_nothing_is_written(check):
    # The role's default: NVIDIA's fingerprint, which the lab's own key does not have. The fresh
    # node has neither the role's keyring nor its sources file; neither may appear.
    _exec("cuda13-fresh", "rm", "-f", KEYRING, SOURCES)
    before = _snapshot("cuda13-fresh")
    rc, report = _playbook(*(["--check"] if check else []), "--limit", "cuda13-fresh",
                           "-e", f"cuda13_repo_key_fingerprint={NVIDIA_FINGERPRINT}")
    assert rc == 2
    assert _failures(report, "cuda13-fresh") == [(
        "Refuse a signing key that cannot be fetched or is not the expected one",
        "cuda13: the CUDA repository signing key from file:///srv/cuda-repo/debian12/x86_64/cuda-archive-key.pub"
        f" has the fingerprint {LAB_FINGERPRINT}, but cuda13_repo_key_fingerprint expects {NVIDIA_FINGERPRINT};"
        " refusing to trust it. Nothing was changed.",
    )]
    assert report["stats"]["cuda13-fresh"]["changed"] == 0, _changed_tasks(report, "cuda13-fresh")
    assert _snapshot("cuda13-fresh") == before
    assert _exec("cuda13-fresh", "sh", "-c", f"ls {KEYRING} {SOURCES} 2>/dev/null || true") == ""


def test_a_fingerprint_that_is_no_fingerprint_is_refused_before_the_key_is_read():
    before = _snapshot("cuda13-fresh")
    rc, report = _playbook("--limit", "cuda13-fresh", "-e", "cuda13_repo_key_fingerprint=3BF863CC")
    assert rc == 2
    assert _failures(report, "cuda13-fresh") == [(
        "Refuse settings and a driver CUDA 13 cannot work with",
        "cuda13: cuda13_repo_key_fingerprint: must be an OpenPGP fingerprint (40 or 64 hexadecimal characters),"
        " got '3BF863CC'.",
    )]
    assert _snapshot("cuda13-fresh") == before


def test_the_fingerprint_is_compared_without_spaces_or_case():
    # Written the way gpg prints it: groups of four, lower case here.
    spaced = " ".join(LAB_FINGERPRINT[i:i + 4] for i in range(0, 40, 4)).lower()
    rc, report = _playbook("--check", "--limit", "cuda13-remove", "-e", json.dumps({"cuda13_repo_key_fingerprint": spaced}))
    assert rc == 0, _failures(report, "cuda13-remove")
    assert report["stats"]["cuda13-remove"]["changed"] == 0, _changed_tasks(report, "cuda13-remove")


# --- generated tamper matrix: every row of the role's table ---------------------------------

# How each kind of row is put off on a converged node, as root.
TAMPER = {
    "file": "printf '# tampered\\n' >> {path}",
    "directory": "chmod 0700 {path}",
    "absent": "printf '# tampered\\n' > {path}",
}


def _outcome(rc, report, host):
    """A run's exit code, the table's paths it changed and the other tasks it changed."""
    return (rc, _changed_paths(report, host), [t for t in _changed_tasks(report, host) if t not in FILES_TASKS])


def _plan(report, host):
    return dict(_task_results(report, host))[
        "Plan the toolkit, its repository and environment from what the node holds"]["ansible_facts"]["cuda13_plan"]


def test_every_row_of_the_table_tampered_alone_is_reported_then_healed():
    """The table comes from the role's own plan (vars/main.yml's __cuda13_files as the node's
    settings make it): a row added there is tampered with here without a new test. For each row
    in turn, on a converged node: a check reports exactly that path and changes no byte, a
    converge heals it; a last converge changes nothing."""
    node = "cuda13-remove"
    rc, report = _playbook("--check", "--limit", node)
    assert rc == 0 and report["stats"][node]["changed"] == 0, _changed_tasks(report, node)
    table = _plan(report, node)["table"]
    assert {row["state"] for row in table} == set(TAMPER), table
    problems = []
    for row in table:
        _exec(node, "sh", "-c", TAMPER[row["state"]].format(path=row["path"]))
        before = _snapshot(node)
        seen = _outcome(*_playbook("--check", "--diff", "--limit", node), node)
        if seen != (0, [row["path"]], []) or _snapshot(node) != before:
            problems.append(f"check of {row['path']} tampered: {seen}")
        # A row whose file the linker cache follows refreshes it too (a command: a check skips it).
        extra = ["Refresh the dynamic linker cache"] if row.get("refresh") == "ldconfig" else []
        seen = _outcome(*_playbook("--limit", node), node)
        if seen != (0, [row["path"]], extra):
            problems.append(f"converge of {row['path']} tampered: {seen}")
    assert problems == []
    rc, report = _playbook("--limit", node)
    assert rc == 0 and report["stats"][node]["changed"] == 0, _changed_tasks(report, node)
