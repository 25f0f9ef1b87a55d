"""The test venvs hold exactly what their pin files say, so a fresh clone runs what last passed.

tools/bootstrap.sh builds the main venv from tools/requirements.txt with tools/constraints.txt
as constraints, and the ansible-core 2.20 venv from tools/requirements-core220.txt alone. A
dependency's new release (cryptography 51 warns at the start of every ansible command) must
not reach a run unnoticed: every installed distribution is pinned, at the version installed.
The execution environment's image takes the same pins (tests/integration/test_execution_environment.py).
"""
from __future__ import annotations

import subprocess

import pytest

from conftest import FLOOR_VENV, ROOT, VENV_BIN, frozen, pinned


@pytest.mark.parametrize("bin_dir, pin_file", [
    (VENV_BIN, "tools/constraints.txt"),
    (FLOOR_VENV / "bin", "tools/requirements-core220.txt"),
], ids=["main", "core220"])
def test_every_installed_distribution_is_pinned_at_its_version(bin_dir, pin_file):
    assert (bin_dir / "python").exists(), f"{bin_dir.parent} is missing: run tools/bootstrap.sh"
    proc = subprocess.run([str(bin_dir / "python"), "-m", "pip", "freeze", "--disable-pip-version-check"],
                          capture_output=True, text=True, check=True)
    want, have = pinned(ROOT / pin_file), frozen(proc.stdout)
    unpinned = sorted(set(have) - set(want))
    assert not unpinned, f"installed but not pinned in {pin_file}: {unpinned}"
    differ = {name: (want[name], have.get(name)) for name in want if have.get(name) != want[name]}
    assert not differ, f"{pin_file} pin vs installed: {differ} (run tools/bootstrap.sh)"


def test_every_requirement_agrees_with_its_constraint():
    want = pinned(ROOT / "tools/constraints.txt")
    asked = pinned(ROOT / "tools/requirements.txt")
    assert {name: version for name, version in asked.items() if want.get(name) != version} == {}
