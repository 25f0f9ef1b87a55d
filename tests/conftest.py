"""Shared fixtures: where the collection resolves, the environment Ansible runs with, caches."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
CACHE = Path(os.environ.get("BLACKWELL_CACHE", ROOT / ".cache"))
# The oldest supported ansible-core's venv (tools/bootstrap.sh, tools/requirements-core220.txt).
FLOOR_VENV = Path(os.environ.get("BLACKWELL_VENV_FLOOR", ROOT / ".venv-core220"))


MOLECULE_TESTS = "tests/test_molecule.py::"
# What each unit of the run (a test file, or one molecule scenario) took in the last full run on
# the 2-core machine, in seconds: tests/costs.json, written by `tools/test.sh --costs
# tests/costs.json`. Units run longest first; a unit it does not know counts as a short one.
COSTS_FILE = ROOT / "tests" / "costs.json"
UNKNOWN_COST = 5.0


def unit_of(nodeid: str) -> str:
    """The unit a test belongs to: its molecule scenario (each has containers and state of its
    own), else its file (a lab test file shares one lab between its tests)."""
    return nodeid if nodeid.startswith(MOLECULE_TESTS) else nodeid.split("::", 1)[0]


def _load_costs() -> dict[str, float]:
    try:
        return {unit: float(cost) for unit, cost in json.loads(COSTS_FILE.read_text(encoding="utf-8")).items()}
    except FileNotFoundError:
        return {}


COSTS = _load_costs()


def pytest_addoption(parser):
    parser.addoption("--costs", metavar="PATH", default=None,
                     help="write each unit's measured seconds (setup, call and teardown of its tests) "
                          "to PATH as JSON, the form of tests/costs.json")


def pytest_collection_modifyitems(items):
    # Stable: a unit's tests keep their order; pytest collects in directory order whatever
    # testpaths says, so the order of the units is set here.
    items.sort(key=lambda item: -COSTS.get(unit_of(item.nodeid), UNKNOWN_COST))


_measured: dict[str, float] = {}


def pytest_runtest_logreport(report):
    # On the controller this sees every worker's reports: setup, call and teardown each count.
    _measured[unit_of(report.nodeid)] = _measured.get(unit_of(report.nodeid), 0.0) + report.duration


def pytest_sessionfinish(session):
    path = session.config.getoption("--costs", None)
    if path and _measured and not hasattr(session.config, "workerinput"):
        Path(path).write_text(json.dumps({unit: round(cost, 1) for unit, cost in sorted(_measured.items())},
                                         indent=1) + "\n", encoding="utf-8")


# Optional: a pytest without xdist (the ansible-core 2.21 venv runs tests/unit so) has no such hook.
@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """tools/test.sh runs each unit (unit_of) whole on one process, longest first. A worker runs
    a test only once it holds the next one, so it always has one unit queued behind the one it
    runs: that unit is the shortest left while what it runs still has long to go, so that a long
    unit is never queued behind another on one worker while a second worker runs out of work."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling  # pylint: disable=import-outside-toplevel

    class CostScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

        def _left(self, node) -> float:
            """Seconds the units assigned to node still need, by their share of tests not done."""
            return sum(COSTS.get(unit, UNKNOWN_COST) * sum(not done for done in tests.values()) / len(tests)
                       for unit, tests in self.assigned_work.get(node, {}).items())

        def _assign_work_unit(self, node) -> None:
            if self._left(node) > 2 * UNKNOWN_COST and len(self.workqueue) > 1:
                # Move the shortest unit to the front, where the parent's pop takes it.
                self.workqueue.move_to_end(next(reversed(self.workqueue)), last=False)
            super()._assign_work_unit(node)

    config.option.loadscopereorder = False
    return CostScheduling(config, log)


def _collections_path() -> str:
    return subprocess.run(
        [str(ROOT / "tools" / "collection-path.sh")], check=True, capture_output=True, text=True
    ).stdout.strip()


COLLECTIONS_PATH = _collections_path()
# Unit tests import the collection's pure-Python cores as
# ansible_collections.blackwell.sglang.plugins.module_utils.<name>.
if COLLECTIONS_PATH not in sys.path:
    sys.path.insert(0, COLLECTIONS_PATH)
# Ansible's own collection loader, before anything imports ansible_collections: the unit tests'
# imports and Ansible's templating in them (tests/role_vars.py) resolve the collection alike.
from ansible.plugins.loader import init_plugin_loader  # noqa: E402 pylint: disable=wrong-import-position

init_plugin_loader([COLLECTIONS_PATH])


def task_entries(tasks):
    """Every mapping of a task file's list: each task, and each block with the tasks of its
    block, rescue and always in turn."""
    for task in tasks or []:
        if isinstance(task, dict):
            yield task
            for key in ("block", "rescue", "always"):
                yield from task_entries(task.get(key))


def ansible_env(**extra: str) -> dict:
    """Environment for ansible-* commands run by the tests: this checkout as the collection."""
    env = dict(os.environ)
    env.update(
        {
            "ANSIBLE_COLLECTIONS_PATH": COLLECTIONS_PATH,
            "ANSIBLE_FORCE_COLOR": "0",
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_LOCALHOST_WARNING": "false",
            "ANSIBLE_INVENTORY_UNPARSED_WARNING": "false",
            "PATH": f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}",
        }
    )
    env.update(extra)
    return env


def run_local_module(module: str, args: dict, *flags: str, interpreter: str | None = sys.executable) -> tuple[int, dict]:
    """One collection module run by ad-hoc `ansible` on localhost; (rc, the host's result).
    interpreter None leaves the choice of Python to Ansible."""
    extra = {"ANSIBLE_LOAD_CALLBACK_PLUGINS": "1", "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json"}
    if interpreter:
        extra["ANSIBLE_PYTHON_INTERPRETER"] = interpreter
    proc = subprocess.run(
        [str(VENV_BIN / "ansible"), "localhost", "-c", "local", "-m", module, "-a", json.dumps(args), *flags],
        env=ansible_env(**extra), capture_output=True, text=True, check=False)
    try:
        report = json.loads(proc.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"no JSON from ansible (rc {proc.returncode}): {proc.stdout}{proc.stderr}")
    return proc.returncode, report["plays"][0]["tasks"][0]["hosts"]["localhost"]


_PIN = re.compile(r"^([A-Za-z0-9._-]+)(?:\[[^\]]*\])?==(\S+)$")


def distribution(name: str) -> str:
    """A distribution's name as pip compares it (PEP 503): PyYAML and pyyaml, a_b and a-b agree."""
    return re.sub(r"[-_.]+", "-", name).lower()


def pinned(path: Path) -> dict[str, str]:
    """name -> version of every `name==version` line of a requirements or constraints file;
    any other requirement fails the calling test."""
    found = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            match = _PIN.match(line)
            assert match, f"{path.relative_to(ROOT)}: {line!r} is not pinned with =="
            found[distribution(match[1])] = match[2]
    return found


def frozen(freeze_output: str) -> dict[str, str]:
    """name -> version of what `pip freeze` printed."""
    return {distribution(name): version for name, version in
            (line.split("==", 1) for line in freeze_output.splitlines() if "==" in line)}


LAB_SH = str(ROOT / "tools" / "lab" / "lab.sh")


def lab_env(work: Path, prefix: str, port_base: str, nodes: int = 1, **settings: str) -> dict:
    """The environment of a test's own lab (tools/lab/lab.sh): its container prefix, SSH ports,
    key, inventory and fact cache under work, and the lab's release and crash policy whatever
    the caller's environment says. settings adds to or overrides these (LAB_CONVERGE=0 ...)."""
    return ansible_env(**{
        "LAB_PREFIX": prefix, "LAB_PORT_BASE": port_base, "LAB_NODES": str(nodes),
        "LAB_STATE": str(work / "state"), "LAB_INVENTORY_DIR": str(work / "inventory"),
        "ANSIBLE_CACHE_PLUGIN_CONNECTION": str(work / "facts"), "LAB_REPORT": "0",
        "LAB_SGLANG_VERSION": "0.5.8", "LAB_CRASH_POLICY": "strict", **settings})


def _lab_failure(up: subprocess.CompletedProcess) -> str:
    """lab.sh's output for a failed `up`, what failed last: a CI log shows only its tail, and
    ansible-playbook's failed tasks (stdout) say more than the fleet's boot retries (stderr)."""
    failed = [line for line in up.stdout.splitlines() if line.startswith(("fatal:", "failed:")) or "FAILED!" in line]
    return (f"{up.stderr[-5000:]}\n--- stdout ---\n{up.stdout[-20000:]}\n--- failed tasks ---\n"
            + "\n".join(failed)[-3000:])


@contextmanager
def running_lab(env: dict) -> Iterator[subprocess.CompletedProcess]:
    """`lab.sh up` with env, its result for the caller to read; `lab.sh down` afterwards,
    whatever happened in between."""
    try:
        up = subprocess.run([LAB_SH, "up"], cwd=ROOT, env=env, capture_output=True, text=True, check=False)
        assert up.returncode == 0, _lab_failure(up)
        yield up
    finally:
        subprocess.run([LAB_SH, "down"], cwd=ROOT, env=env, capture_output=True, check=False)


RECAP = re.compile(
    r"^(?P<host>\S+)\s*: ok=(?P<ok>\d+)\s+changed=(?P<changed>\d+)\s+unreachable=(?P<unreachable>\d+)"
    r"\s+failed=(?P<failed>\d+)\s+skipped=\d+\s+rescued=(?P<rescued>\d+)\s+ignored=(?P<ignored>\d+)",
    re.MULTILINE)


def recap(output: str) -> dict:
    """ansible-playbook's play recap: host -> {ok, changed, unreachable, failed, rescued, ignored}.
    Where the output holds several recaps, a host's last one."""
    return {m["host"]: {k: int(v) for k, v in m.groupdict().items() if k != "host"}
            for m in RECAP.finditer(output)}


def drift_report(inventory: Path, playbook: Path, env: dict, out: Path) -> tuple[int, dict, str]:
    """tools/drift-report (site.yml or playbook in check and diff mode) on inventory: its exit
    status, its JSON report (out.json; {} if it wrote none) and what it printed. The Markdown
    report goes to out.md."""
    json_path = out.with_suffix(".json")
    json_path.unlink(missing_ok=True)
    proc = subprocess.run(
        [str(ROOT / "tools" / "drift-report"), "-i", str(inventory), "-p", str(playbook),
         "--json", str(json_path), "--markdown", str(out.with_suffix(".md"))],
        cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    report = json.loads(json_path.read_text()) if json_path.exists() else {}
    return proc.returncode, report, proc.stdout + proc.stderr


def in_container(name: str, script: str) -> str:
    """What `sh -c script` prints as root in the container name; failing is a test failure."""
    proc = subprocess.run(["podman", "exec", name, "sh", "-c", script], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, f"{name}: {script}\n{proc.stdout}{proc.stderr}"
    return proc.stdout


def copy_as_collection(tmp_path: Path) -> Path:
    """Copy the tracked (and untracked, not ignored) files to tmp_path as
    ansible_collections/blackwell/sglang, the layout ansible-test and a fresh clone use."""
    dest = tmp_path / "ansible_collections" / "blackwell" / "sglang"
    files = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT, check=True, capture_output=True,
    ).stdout.decode().split("\0")
    for rel in filter(None, files):
        src = ROOT / rel
        if src.exists():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel, follow_symlinks=False)
    return dest


def run_sanity(tmp_path: Path, bindir: Path, python: str, env: dict) -> subprocess.CompletedProcess:
    """ansible-test sanity, from bindir's ansible-core, on a copy of the tree laid out as a
    collection and committed to a repository of its own (ansible-test lists files through git)."""
    dest = copy_as_collection(tmp_path)
    subprocess.run(["git", "init", "-q"], cwd=dest, check=True)
    subprocess.run(["git", "add", "-A"], cwd=dest, check=True)
    return subprocess.run(
        [str(bindir / "ansible-test"), "sanity", "--venv", "--python", python, "--color", "no"],
        cwd=dest, env=env, capture_output=True, text=True, check=False,
    )


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def cache_dir() -> Path:
    CACHE.mkdir(parents=True, exist_ok=True)
    return CACHE


@pytest.fixture(scope="session")
def collections_path() -> str:
    return COLLECTIONS_PATH


def local_play_tasks(tmp_path: Path, play: list, *args: str, expect_rc: int = 0) -> list:
    """Run a play on localhost (local connection, the test venv's Python) with the
    ansible.posix.json callback, assert its exit status, and return (task name, localhost's
    result) for every task it ran."""
    playbook = tmp_path / "play.yml"
    playbook.write_text(json.dumps(play), encoding="utf-8")
    env = ansible_env(ANSIBLE_STDOUT_CALLBACK="ansible.posix.json")
    env.pop("ANSIBLE_CALLBACKS_ENABLED", None)
    proc = subprocess.run(
        [str(VENV_BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local", str(playbook),
         "-e", f"ansible_python_interpreter={VENV_BIN / 'python'}", *args],
        env=env, capture_output=True, text=True, check=False,
    )
    assert proc.returncode == expect_rc, proc.stdout[-20000:] + proc.stderr[-5000:]
    report = json.JSONDecoder().raw_decode(proc.stdout[proc.stdout.index("{"):])[0]
    # A meta task that ends a role shows with no host result.
    return [(t["task"]["name"], t["hosts"]["localhost"]) for p in report["plays"] for t in p["tasks"]
            if "localhost" in t["hosts"]]
