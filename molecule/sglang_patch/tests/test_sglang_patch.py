"""The sglang_patch scenario: SGLang installed and patched in the lab, upgraded and checked.

The host tests assert the state converge left behind (release A, 0.5.8, on both nodes). The
stage tests after them drive ansible-playbook from the controller against the same containers,
in order: the upgrade to release B (0.5.18) that drops the patch, check mode reporting exactly
that drift, the converge that re-applies it, a second converge and check mode that report
nothing, and bad input (rollback with state absent is proven in tests/integration). Every
file assertion reads the installed files inside the containers (tests/probe_sglang.py);
nothing here imports SGLang.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import testinfra

SCENARIO = Path(__file__).resolve().parent.parent
PROBE = (Path(__file__).resolve().parent / "probe_sglang.py").read_text(encoding="utf-8")
INVENTORY = os.environ.get("MOLECULE_INVENTORY_FILE", "")
# The link to the active release, which the probe and the checks read through.
VENV = "/opt/sglang/current"
RELEASES = "/opt/sglang/releases"
SM120, SM90 = "sglang-patch-sm120", "sglang-patch-sm90"
RELEASE_A, RELEASE_B = "0.5.8", "0.5.18"
ALL_REDUCE = "srt/distributed/device_communicators/all_reduce_utils.py"
SYMM_MEM = "srt/distributed/device_communicators/torch_symm_mem.py"
PATCH_TASK = "blackwell.sglang.sglang_sm120_patch : Patch SGLang's capability dicts for the node's GPUs"
RESTART = "Restart sglang"
RESTART_LOG = "/var/lib/lab/sglang-restarts.log"


def node(name):
    # The inventory logs in as the nodes' sudo user; the checks read and plant root's files.
    return testinfra.get_host(f"ansible://{name}?ansible_inventory={INVENTORY}", sudo=True)


def probe(name):
    out = node(name).check_output("python3 -c %s %s", PROBE, VENV)
    return json.loads(out)


def restarts(name):
    log = node(name).file(RESTART_LOG)
    return log.content_string.splitlines() if log.exists else []


def playbook(name, *args, expect_rc=0):
    """Run a scenario playbook; return {host: [names of changed tasks]} and the raw JSON."""
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.posix.json")
    # Extra callbacks would print around the JSON report.
    env.pop("ANSIBLE_CALLBACKS_ENABLED", None)
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "-i", INVENTORY, str(SCENARIO / name), *args],
        env=env, capture_output=True, text=True, check=False,
    )
    assert proc.returncode == expect_rc, proc.stdout[-20000:] + proc.stderr[-5000:]
    report = json.JSONDecoder().raw_decode(proc.stdout[proc.stdout.index("{"):])[0]
    changed = {host: [] for host in report["stats"]}
    for play in report["plays"]:
        for task in play["tasks"]:
            for host, result in task["hosts"].items():
                if result.get("changed"):
                    changed[host].append(task["task"]["name"])
    return changed, report


def failures(report):
    return {
        host: result.get("msg")
        for play in report["plays"] for task in play["tasks"]
        for host, result in task["hosts"].items() if result.get("failed")
    }


def assert_patched(state, source_key="10"):
    for rel in (ALL_REDUCE, SYMM_MEM):
        entry = state["files"][rel]
        assert entry["dict"]["12"] == entry["dict"][source_key], rel
        assert entry["sha256"] != entry["record_sha256"], rel
    # The purge takes exactly the two rewritten modules' bytecode; the rest of SGLang keeps its own.
    assert state["missing_bytecode"] == [ALL_REDUCE, SYMM_MEM]
    assert state["modules"] > 1000


def assert_pristine(state):
    for rel in (ALL_REDUCE, SYMM_MEM):
        entry = state["files"][rel]
        assert entry["record_sha256"], rel
        assert entry["sha256"] == entry["record_sha256"], rel
        assert sorted(entry["dict"]) == ["10", "9"], rel


def _only(host, name):
    if host.backend.get_hostname() != name:
        pytest.skip("asserted on another node")


# --- state after converge (release A) and molecule's idempotence step -------------------------

def test_pinned_release_installed_from_metadata(host):
    assert probe(host.backend.get_hostname())["version"] == RELEASE_A
    dist = host.file(f"{VENV}/lib/python3.11/site-packages/sglang-{RELEASE_A}.dist-info/METADATA")
    assert dist.exists and dist.user == "root"


def test_service_account_and_venv_ownership(host):
    user = host.user("sglang")
    assert user.group == "sglang"
    assert user.shell == "/usr/sbin/nologin"
    assert user.uid < 1000
    assert user.home == "/var/lib/sglang"
    home = host.file("/var/lib/sglang")
    assert (home.user, home.group, home.mode) == ("sglang", "sglang", 0o750)
    venv = host.file(VENV)
    assert (venv.user, venv.group) == ("root", "root")


def test_installer_per_node(host):
    uv = host.file("/opt/sglang/uv/bin/uv")
    if host.backend.get_hostname() == SM120:
        assert uv.exists
        assert host.check_output("/opt/sglang/uv/bin/uv --version").startswith("uv 0.13.9")
        # uv made the venv (no pip in it) and compiled the bytecode.
        assert not host.file(f"{VENV}/bin/pip").exists
    else:
        assert not uv.exists
        assert host.file(f"{VENV}/bin/pip").exists
        # sglang_install_compile_bytecode: false on this node
        assert len(probe(SM90)["missing_bytecode"]) == probe(SM90)["modules"]


def test_package_sources_in_root_only_files(host):
    name = host.backend.get_hostname()
    files = {SM120: [f"{VENV}/blackwell-sources.toml", "/opt/sglang/uv/blackwell-sources.conf"],
             SM90: [f"{VENV}/blackwell-sources.conf"]}[name]
    for path in files:
        sources = host.file(path)
        assert (sources.user, sources.group, sources.mode) == ("root", "root", 0o600), path
    lines = host.file(files[0]).content_string.splitlines()
    assert ('find-links = ["/srv/wheelhouse"]' if name == SM120 else "find-links = /srv/wheelhouse") in lines


def test_release_a_patched_on_sm120(host):
    _only(host, SM120)
    state = probe(SM120)
    assert_patched(state)
    assert state["files"][SYMM_MEM]["dict"]["12"] == [6, 8]
    assert state["files"][ALL_REDUCE]["dict"]["12"]["8"] == 128 * 1024 * 1024


def test_sm90_node_untouched(host):
    _only(host, SM90)
    assert_pristine(probe(SM90))


def test_one_restart_requested_for_the_patch(host):
    want = 1 if host.backend.get_hostname() == SM120 else 0
    assert len(restarts(host.backend.get_hostname())) == want


# --- stages driven from the controller, in order ----------------------------------------------

def new_release(release, *after):
    """What installing a release beside the active one changes on a node, per installer."""
    role = "blackwell.sglang.sglang_install : "
    # The install is marked as under way before its request is written and unmarked once the
    # installer finished (a run killed in between leaves the mark, and the next one installs again).
    files = [role + "Mark the release's install as under way", role + "Write the install request",
             role + "Write the package sources", role + f"Install the pinned SGLang release {release}",
             role + "Mark the release's install as finished",
             role + f"Point the active-release link at release {release}", *after]
    return {SM120: [role + "Create the release's venv with uv"] + files,
            SM90: [role + "Create the release's venv with the interpreter's venv module"] + files}


def test_upgrade_to_release_b_drops_the_patch():
    changed, _report = playbook("upgrade.yml", "-e", f"sglang_install_version={RELEASE_B}")
    # Release B gets a venv of its own beside A, and the link is switched to it.
    assert changed == new_release(RELEASE_B)
    for name in (SM120, SM90):
        state = probe(name)
        assert state["version"] == RELEASE_B
        assert_pristine(state)
        host = node(name)
        assert host.check_output("readlink %s", VENV) == f"{RELEASES}/{RELEASE_B}"
        # Release A stays, patched as it was, to go back to.
        assert sorted(host.check_output("ls %s", RELEASES).split()) == sorted([RELEASE_A, RELEASE_B])
    # uv compiled release B's bytecode, the two modules included.
    assert probe(SM120)["missing_bytecode"] == []


def test_check_mode_reports_exactly_the_patch_drift():
    before = {name: probe(name) for name in (SM120, SM90)}
    changed, report = playbook("converge.yml", "--check", "-e", f"sglang_install_version={RELEASE_B}")
    assert changed == {SM120: [PATCH_TASK], SM90: []}
    # The restart the patch asks for is taken outside check mode only: not judged there.
    restart = [task["hosts"][SM120] for play in report["plays"] for task in play["tasks"]
               if task["task"]["name"] == RESTART and SM120 in task["hosts"]]
    assert len(restart) == 1 and restart[0].get("skipped") is True, restart
    assert restart[0]["false_condition"] == "not ansible_check_mode", restart
    assert {name: probe(name) for name in (SM120, SM90)} == before
    assert len(restarts(SM120)) == 1


def test_converge_reapplies_the_patch_on_release_b():
    changed, _report = playbook("converge.yml", "-e", f"sglang_install_version={RELEASE_B}")
    assert changed == {SM120: [PATCH_TASK, RESTART], SM90: []}
    state = probe(SM120)
    assert state["version"] == RELEASE_B
    assert_patched(state)
    assert state["files"][SYMM_MEM]["dict"]["12"] == [4, 6, 8]
    assert_pristine(probe(SM90))
    assert len(restarts(SM120)) == 2
    assert restarts(SM120)[-1].startswith(f"restart for SGLang {RELEASE_B} at ")
    assert restarts(SM90) == []


def test_converged_release_b_is_idempotent_and_check_clean():
    changed, _report = playbook("converge.yml", "-e", f"sglang_install_version={RELEASE_B}")
    assert changed == {SM120: [], SM90: []}
    before = probe(SM120)
    assert_patched(before)
    changed, _report = playbook("converge.yml", "--check", "-e", f"sglang_install_version={RELEASE_B}")
    assert changed == {SM120: [], SM90: []}
    assert probe(SM120) == before
    assert len(restarts(SM120)) == 2


# --- generated tamper matrix: every row of sglang_install's table -------------------------------

# How each kind of row is put off on a converged node, as root.
TAMPER = {
    "file": "printf '# tampered\\n' >> {path}",
    "directory": "chmod 0700 {path}",
    "link": f"ln -sfn {RELEASES}/{RELEASE_A} {{path}}",
}
INSTALL_ROLE = "blackwell.sglang.sglang_install : "


def _snapshot(name):
    """What the role manages on the node, byte for byte: every path's type, mode, owner and link
    target under the venvs, the releases and the account's home, and each file's checksum."""
    return node(name).check_output(
        "find %s %s -xdev -printf '%%p %%y %%m %%u %%g %%l\\n' | sort; find %s %s -xdev -type f -print0 | sort -z"
        " | xargs -0 sha256sum", *(["/opt/sglang", "/var/lib/sglang"] * 2))


def _row_outcome(report, host):
    """The table's paths the role's looped tasks changed (or would change), and the other tasks
    that changed on the host."""
    paths, others = [], []
    for play in report["plays"]:
        for task in play["tasks"]:
            result = task["hosts"].get(host, {})
            results = result.get("results") if isinstance(result.get("results"), list) else []
            rows = [item for item in results if isinstance(item.get("item"), dict) and "phase" in item["item"]]
            if rows:
                paths += [item["item"]["path"] for item in rows if item.get("changed")]
            elif result.get("changed"):
                others.append(task["task"]["name"])
    return paths, others


def test_every_row_of_the_install_table_tampered_alone_is_reported_then_healed():
    """The table comes from the plan a check publishes (sglang_install_plan, vars/main.yml's
    __sglang_install_files as each node's settings make it): a row added there is tampered with
    here without a new test. One row per node at a time, on both nodes (the uv node's table has
    uv's own sources, the pip node's has not): a check reports exactly that path and changes no
    byte; a converge heals it (a request file also runs the installer again, which finds the
    release in place); a last converge changes nothing."""
    pin = ("-e", f"sglang_install_version={RELEASE_B}")
    _changed, report = playbook("converge.yml", "--check", *pin)
    plans = {}
    for play in report["plays"]:
        for task in play["tasks"]:
            for name in (SM120, SM90):
                facts = task["hosts"].get(name, {}).get("ansible_facts", {})
                if "sglang_install_plan" in facts:
                    plans[name] = facts["sglang_install_plan"]
    tables = {name: plans[name]["table"] for name in (SM120, SM90)}
    assert plans[SM120]["steps"] == plans[SM90]["steps"] == []
    assert {row["state"] for row in tables[SM120]} == set(TAMPER), tables[SM120]
    assert len(tables[SM120]) == len(tables[SM90]) + 1
    problems = []
    for index in range(len(tables[SM120])):
        rows = {name: tables[name][index] for name in (SM120, SM90) if index < len(tables[name])}
        for name, row in rows.items():
            node(name).check_output(TAMPER[row["state"]].format(path=row["path"]))
        before = {name: _snapshot(name) for name in rows}
        _changed, report = playbook("converge.yml", "--check", "--diff", *pin)
        for name, row in rows.items():
            seen = _row_outcome(report, name)
            if seen != ([row["path"]], []) or _snapshot(name) != before[name]:
                problems.append(f"{name}: check of {row['path']} tampered: {seen}")
        _changed, report = playbook("converge.yml", *pin)
        for name, row in rows.items():
            extra = [f"{INSTALL_ROLE}Mark the release's install as under way",
                     f"{INSTALL_ROLE}Install the pinned SGLang release {RELEASE_B}",
                     f"{INSTALL_ROLE}Mark the release's install as finished"] if row["phase"] == "request" else []
            seen = _row_outcome(report, name)
            if seen != ([row["path"]], extra):
                problems.append(f"{name}: converge of {row['path']} tampered: {seen}")
    assert problems == []
    changed, _report = playbook("converge.yml", *pin)
    assert changed == {SM120: [], SM90: []}
    assert_patched(probe(SM120))
    assert len(restarts(SM120)) == 2


def test_unknown_installer_is_refused_before_any_change():
    before = probe(SM90)
    changed, report = playbook(
        "converge.yml", "-l", SM90, "-e", "sglang_install_installer=conda", expect_rc=2
    )
    assert changed == {SM90: []}
    msg = failures(report)[SM90]
    assert "value of sglang_install_installer must be one of: uv, pip, got: conda" in msg
    assert probe(SM90) == before


def test_offline_install_without_wheelhouse_is_refused():
    changed, report = playbook(
        "converge.yml", "-l", SM90, "-e", '{"sglang_install_find_links": []}', expect_rc=2
    )
    assert changed == {SM90: []}
    assert failures(report) == {
        SM90: "sglang_install_no_index is true but sglang_install_find_links is empty; nothing could be installed"
    }


# Stand-in for the torch/version.py a CUDA 12.8 torch wheel carries (the real wheel is 900 MB of
# CUDA libraries), in the format torch's build writes; the role reads it without importing.
TORCH_CU128_VERSION_PY = """from typing import Optional

__all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip', 'xpu']
__version__ = '2.9.1+cu128'
debug = False
cuda: Optional[str] = '12.8'
git_version = '0000000000000000000000000000000000000000'
hip: Optional[str] = None
xpu: Optional[str] = None
"""


def test_cuda_12_torch_fails_the_cuda_13_policy():
    torch_dir = f"{VENV}/lib/python3.11/site-packages/torch"
    sm90 = node(SM90)
    sm90.check_output("mkdir -p %s && printf '%%s' %s > %s/version.py", torch_dir, TORCH_CU128_VERSION_PY, torch_dir)
    try:
        changed, report = playbook(
            "upgrade.yml", "-l", SM90, "-e", f"sglang_install_version={RELEASE_B}",
            "-e", "sglang_install_torch_cuda_policy=fail", expect_rc=2,
        )
        assert changed == {SM90: []}
        assert failures(report) == {
            SM90: f"torch in {RELEASES}/{RELEASE_B} is built for CUDA '12.8', not CUDA 13.x; install a CUDA 13 torch "
                  "(for example from PyTorch's cu130 index through sglang_install_extra_index_urls)"
        }
    finally:
        sm90.check_output("rm -rf %s", torch_dir)


# --- hash-locked installs ---------------------------------------------------------------------
# The lab wheelhouse as the controller built it (tools/lab/build-wheelhouse.sh); the nodes
# mount the same files at /srv/wheelhouse.
WHEELHOUSE = SCENARIO.parent.parent / ".cache" / "lab" / "wheelhouse"
RELEASE_C = "0.5.23"
TAMPERED = "/var/tmp/tampered-wheelhouse"
REQUIREMENTS = f"{VENV}/blackwell-requirements.txt"


ADD_MODULE = "import sys, zipfile; z = zipfile.ZipFile(sys.argv[1], 'a'); z.writestr('sglang/planted.py', 'PLANTED = True\\n'); z.close()"


def wheel(release):
    (path,) = WHEELHOUSE.glob(f"sglang-{release}-*.whl")
    return path


def lock(release):
    """A lock as `uv pip compile --generate-hashes` writes it, for the wheel the lab serves."""
    digest = hashlib.sha256(wheel(release).read_bytes()).hexdigest()
    return f"sglang=={release} \\\n    --hash=sha256:{digest}\n"


def locked_release(name, release):
    """The directory name the active-release link of node name points at: release plus the
    digest of a request beyond the bare version."""
    target = node(name).check_output("readlink %s", VENV)
    found = re.fullmatch(re.escape(RELEASES) + "/(" + re.escape(release) + "-[0-9a-f]{10})", target)
    assert found, target
    return found.group(1)


def install_commands(report):
    return {
        host: result["cmd"]
        for play in report["plays"] for task in play["tasks"]
        if task["task"]["name"].startswith("blackwell.sglang.sglang_install : Install the pinned SGLang release")
        for host, result in task["hosts"].items() if "cmd" in result
    }


def test_a_lock_that_pins_another_release_is_refused_before_any_change():
    before = probe(SM90)
    changed, report = playbook("upgrade.yml", "-l", SM90, "-e", json.dumps(
        {"sglang_install_version": RELEASE_C, "sglang_install_requirements_lock": lock(RELEASE_B)}), expect_rc=2)
    assert changed == {SM90: []}
    assert failures(report) == {
        SM90: f"sglang_install_requirements_lock does not pin sglang=={RELEASE_C} (sglang_install_version);"
              " lock that release, with its hashes"
    }
    assert probe(SM90) == before


def test_a_hash_locked_install_passes():
    changed, report = playbook("upgrade.yml", "-e", json.dumps(
        {"sglang_install_version": RELEASE_C, "sglang_install_requirements_lock": lock(RELEASE_C)}))
    # Release C comes beside B; A, the oldest, goes (sglang_install_keep_releases: 2). A lock is a
    # request beyond the version: its directory is named for it.
    assert changed == new_release(RELEASE_C, "blackwell.sglang.sglang_install : Remove releases beyond sglang_install_keep_releases")
    for name in (SM120, SM90):
        locked = locked_release(name, RELEASE_C)
        assert sorted(node(name).check_output("ls %s", RELEASES).split()) == sorted([RELEASE_B, locked])
    for name, argv in install_commands(report).items():
        assert "--require-hashes" in argv, (name, argv)
        # The wheelhouse reaches the installer through its sources file, not the command line.
        assert not [arg for arg in argv if "/srv/wheelhouse" in arg], (name, argv)
    for name in (SM120, SM90):
        assert probe(name)["version"] == RELEASE_C
        # Whether content_string keeps the file's final newline depends on testinfra's backend.
        text = node(name).file(REQUIREMENTS).content_string
        assert text.rstrip("\n").endswith(lock(RELEASE_C).rstrip("\n")), text


def test_a_tampered_wheel_fails_the_hashes_and_leaves_the_install_untouched():
    # A copy of the wheelhouse whose release B wheel has the same name and other bytes: one more
    # module in it, so that it is still a valid wheel and only its hash gives it away.
    tampered = f"{TAMPERED}/{wheel(RELEASE_B).name}"
    for name in (SM120, SM90):
        # Release B still sits beside C; an installer finds it satisfied there and fetches
        # nothing, so it goes first: this install has to take the wheel.
        node(name).check_output("rm -rf %s/%s", RELEASES, RELEASE_B)
        node(name).check_output("mkdir -p %s && cp %s %s", TAMPERED, f"/srv/wheelhouse/{wheel(RELEASE_B).name}", tampered)
        node(name).check_output("python3 -c %s %s", ADD_MODULE, tampered)
    before = {name: probe(name) for name in (SM120, SM90)}
    try:
        changed, report = playbook("upgrade.yml", "-e", json.dumps(
            {"sglang_install_version": RELEASE_B, "sglang_install_requirements_lock": lock(RELEASE_B),
             "sglang_install_find_links": [TAMPERED]}), expect_rc=2)
    finally:
        for name in (SM120, SM90):
            node(name).check_output("rm -rf %s", TAMPERED)
    messages = failures(report)
    prefix = re.escape(f"sglang_install: installing SGLang {RELEASE_B} into {RELEASES}/{RELEASE_B}") + "-[0-9a-f]{10}" + " failed: "
    assert re.fullmatch(prefix + re.escape(f"cause: Hash mismatch for `sglang=={RELEASE_B}`"), messages[SM120]), messages
    assert re.fullmatch(prefix + re.escape(
        "ERROR: THESE PACKAGES DO NOT MATCH THE HASHES FROM THE REQUIREMENTS FILE. If you have"
        " updated the package versions, please update the hashes. Otherwise, examine the package"
        " contents carefully; someone may have tampered with them."), messages[SM90]), messages
    assert set(messages) == {SM90, SM120}
    assert {name: probe(name) for name in (SM120, SM90)} == before
    for name in (SM120, SM90):
        assert before[name]["version"] == RELEASE_C
        # The release directory the failed install made went with it.
        assert node(name).check_output("ls %s", RELEASES).split() == [locked_release(name, RELEASE_C)]


def test_index_credentials_stay_out_of_argv_and_output():
    """Index URLs with a password, a token in the path and one in the query (never contacted: the
    lab installs with --no-index) go to the root-only sources files, and appear nowhere in a
    -vvv --diff run: not in the remote command lines Ansible prints there, not in a task's output
    or diff. The request files beside them are root's alone too."""
    secrets = ("s3cret-lab-password", "p4th-t0ken-lab", "qu3ry-t0ken-lab")
    url = f"http://lab:{secrets[0]}@127.0.0.1:9/simple"
    tokened = f"http://127.0.0.1:9/{secrets[1]}/simple?token={secrets[2]}"
    env = dict(os.environ, ANSIBLE_NOCOLOR="1")
    env.pop("ANSIBLE_CALLBACKS_ENABLED", None)
    env.pop("ANSIBLE_STDOUT_CALLBACK", None)
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "-vvv", "--diff", "-i", INVENTORY,
         str(SCENARIO / "upgrade.yml"),
         "-e", json.dumps({"sglang_install_version": RELEASE_C, "sglang_install_index_url": url,
                           "sglang_install_extra_index_urls": [tokened]})],
        env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout[-20000:] + proc.stderr[-5000:]
    # The install ran (the plain request is a release of its own, beside the locked one) and was hidden.
    assert f"Install the pinned SGLang release {RELEASE_C}" in proc.stdout
    assert "the output has been hidden" in proc.stdout
    assert [secret for secret in secrets if secret in proc.stdout + proc.stderr] == []
    # uv itself comes from the index alone, without the extra indexes.
    for name, path, wanted in ((SM120, f"{VENV}/blackwell-sources.toml", [url, tokened]),
                               (SM120, "/opt/sglang/uv/blackwell-sources.conf", [url]),
                               (SM90, f"{VENV}/blackwell-sources.conf", [url, tokened])):
        content = node(name).file(path).content_string
        assert [u for u in wanted if u not in content] == [], (name, path)
    for name in (SM120, SM90):
        assert probe(name)["version"] == RELEASE_C
        for request in ("blackwell-requirements.txt", "blackwell-constraints.txt"):
            found = node(name).file(f"{VENV}/{request}")
            assert (found.mode, found.user, found.group) == (0o600, "root", "root"), (name, request)


def test_a_changed_request_for_the_installed_release_is_installed_beside_it():
    """Release C runs from its plain request; one more package asked for with the same version is
    a release of its own beside it, and the link is switched to it. The release that ran is
    not touched: a rollback has it as it was."""
    site = "lib/python3.11/site-packages"
    # Its request file, and each entry of its site-packages with its time.
    release_state = "cd %s/%s && sha256sum blackwell-requirements.txt && find %s -maxdepth 1 -printf '%%f %%T@\\n' | sort"
    # The sources as the scenario sets them again (the test before gave uv and C an index).
    playbook("upgrade.yml", "-e", f"sglang_install_version={RELEASE_C}")
    serving = {}
    for name in (SM120, SM90):
        assert node(name).check_output("readlink %s", VENV) == f"{RELEASES}/{RELEASE_C}"
        serving[name] = node(name).check_output(release_state, RELEASES, RELEASE_C, site)
    changed, _report = playbook("upgrade.yml", "-e", json.dumps(
        {"sglang_install_version": RELEASE_C, "sglang_install_extra_packages": ["uv==0.13.9"]}))
    assert changed == new_release(RELEASE_C, "blackwell.sglang.sglang_install : Remove releases beyond sglang_install_keep_releases")
    for name in (SM120, SM90):
        host = node(name)
        widened = locked_release(name, RELEASE_C)
        assert sorted(host.check_output("ls %s", RELEASES).split()) == sorted([RELEASE_C, widened]), name
        assert host.file(f"{RELEASES}/{widened}/{site}/uv-0.13.9.dist-info").is_directory, name
        assert host.check_output(release_state, RELEASES, RELEASE_C, site) == serving[name]
        assert probe(name)["version"] == RELEASE_C
