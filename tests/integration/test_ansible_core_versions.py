"""The oldest ansible-core the collection supports, 2.20 (meta/runtime.yml), on Python 3.12+.

The main venv runs the newest, 2.21 (tests/test_sanity.py and tests/unit run there). The same
checks run here under ansible-core 2.20.10 alone, from the venv tools/bootstrap.sh builds from
tools/requirements-core220.txt:
- ansible-test sanity on a copy of the tree, with 2.20's rules and the venv's Python;
- the unit tests, in a pytest run of that venv's interpreter.
tests/integration/test_collection_install.py installs the tarball and converges a lab node with it.
"""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from conftest import FLOOR_VENV, ROOT, ansible_env, run_sanity

FLOOR_VERSION = "2.20.10"


def floor_bin() -> Path:
    """bin/ of the ansible-core 2.20 venv; fails the calling test with what to do when the
    venv is missing or holds another ansible-core."""
    python = FLOOR_VENV / "bin" / "python"
    assert python.exists(), (
        f"{FLOOR_VENV} is missing: run tools/bootstrap.sh, which creates it from "
        "tools/requirements-core220.txt."
    )
    version = subprocess.run(
        [str(python), "-c", "import ansible.release; print(ansible.release.__version__)"],
        capture_output=True, text=True, check=False,
    )
    assert version.stdout.strip() == FLOOR_VERSION, (
        f"{FLOOR_VENV} holds ansible-core {version.stdout.strip() or version.stderr.strip()}, "
        f"not {FLOOR_VERSION}: run tools/bootstrap.sh"
    )
    return python.parent


def floor_env(**extra: str) -> dict:
    """ansible_env() with the 2.20 venv first on PATH: its python is the one ansible-test
    finds (pyenv's shim for a non-global version would fail)."""
    env = ansible_env(**extra)
    env["PATH"] = f"{floor_bin()}{os.pathsep}{env['PATH']}"
    return env


def floor_python() -> str:
    """The floor venv's Python version, as ansible-test names it (3.12)."""
    return subprocess.run(
        [str(floor_bin() / "python"), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
        capture_output=True, text=True, check=True).stdout.strip()


def test_ansible_test_sanity_passes_on_oldest_core(tmp_path):
    python = floor_python()
    proc = run_sanity(tmp_path, floor_bin(), python, floor_env())
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-20000:]
    # The tests that load the plugins ran, on the venv's Python: not a run that skipped them.
    for ran in ('Running sanity test "validate-modules"', f'Running sanity test "import" on Python {python}',
                f'Running sanity test "compile" on Python {python}'):
        assert ran in output, output[-5000:]


def test_unit_tests_pass_on_oldest_core():
    bindir = floor_bin()
    proc = subprocess.run(
        [str(bindir / "python"), "-m", "pytest", "tests/unit", "-q", "-p", "no:cacheprovider"],
        cwd=ROOT, env=floor_env(), capture_output=True, text=True, check=False,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-20000:]
    summary = output.strip().splitlines()[-1]
    passed = re.search(r"\b(\d+) passed\b", summary)
    assert passed and int(passed.group(1)) > 0, summary
    assert not re.search(r"\b(failed|error|errors)\b", summary), summary
    # The interpreter was the venv's (3.12 or newer) and the ansible the tests imported was 2.20.
    header = subprocess.run(
        [str(bindir / "python"), "-c",
         "import sys, ansible.release; print(sys.version_info >= (3, 12), ansible.release.__version__)"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.strip()
    assert header == f"True {FLOOR_VERSION}"
