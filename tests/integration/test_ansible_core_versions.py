"""The newest ansible-core the collection supports, 2.21, on Python 3.12.

meta/runtime.yml names the oldest tested ansible-core (2.19, the main venv: tests/test_sanity.py
and tests/unit run there). The same checks run here under ansible-core 2.21.5 from the venv
tools/bootstrap.sh builds from tools/requirements-core221.txt:
- ansible-test sanity on a copy of the tree, with 2.21's rules and Python 3.12;
- the unit tests, in a pytest run of that venv's interpreter.
tests/integration/test_collection_install.py converges a lab node with it.

ansible-core 2.20 and later need Python 3.12, which Debian 12 does not ship: without one the
venv is missing and these tests fail, saying what to install.
"""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from conftest import ROOT, ansible_env, run_sanity

CORE221_VERSION = "2.21.5"
CORE221_VENV = Path(os.environ.get("BLACKWELL_VENV_CORE221", ROOT / ".venv-core221"))


def core221_bin() -> Path:
    """bin/ of the ansible-core 2.21 venv; fails the calling test with what to do when the
    venv is missing or holds another ansible-core."""
    python = CORE221_VENV / "bin" / "python"
    assert python.exists(), (
        f"{CORE221_VENV} is missing: ansible-core {CORE221_VERSION} needs Python 3.12. Install "
        "Python 3.12 (e.g. pyenv install 3.12.1, or set BLACKWELL_PYTHON312 to a python3.12) "
        "and run tools/bootstrap.sh, which creates the venv from tools/requirements-core221.txt."
    )
    version = subprocess.run(
        [str(python), "-c", "import ansible.release; print(ansible.release.__version__)"],
        capture_output=True, text=True, check=False,
    )
    assert version.stdout.strip() == CORE221_VERSION, (
        f"{CORE221_VENV} holds ansible-core {version.stdout.strip() or version.stderr.strip()}, "
        f"not {CORE221_VERSION}: run tools/bootstrap.sh"
    )
    return python.parent


def core221_env(**extra: str) -> dict:
    """ansible_env() with the 2.21 venv first on PATH: its python3.12 is the one ansible-test
    finds (pyenv's shim for a non-global 3.12 would fail)."""
    env = ansible_env(**extra)
    env["PATH"] = f"{core221_bin()}{os.pathsep}{env['PATH']}"
    return env


def test_ansible_test_sanity_passes_on_newest_core(tmp_path):
    proc = run_sanity(tmp_path, core221_bin(), "3.12", core221_env())
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-20000:]
    # The tests that load the plugins ran, on 3.12: not a run that skipped them.
    for ran in ('Running sanity test "validate-modules"', 'Running sanity test "import" on Python 3.12',
                'Running sanity test "compile" on Python 3.12'):
        assert ran in output, output[-5000:]


def test_unit_tests_pass_on_newest_core():
    bindir = core221_bin()
    proc = subprocess.run(
        [str(bindir / "python"), "-m", "pytest", "tests/unit", "-q", "-p", "no:cacheprovider"],
        cwd=ROOT, env=core221_env(), capture_output=True, text=True, check=False,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-20000:]
    summary = output.strip().splitlines()[-1]
    passed = re.search(r"\b(\d+) passed\b", summary)
    assert passed and int(passed.group(1)) > 0, summary
    assert not re.search(r"\b(failed|error|errors)\b", summary), summary
    # The interpreter was the venv's 3.12 and the ansible the tests imported was 2.21.
    header = subprocess.run(
        [str(bindir / "python"), "-c",
         "import sys, ansible.release; print(sys.version_info[:2], ansible.release.__version__)"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.strip()
    assert header == f"(3, 12) {CORE221_VERSION}"
