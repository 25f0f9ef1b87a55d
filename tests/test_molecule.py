"""Every molecule scenario under molecule/, run in full in the local podman lab."""
from __future__ import annotations

import subprocess

import pytest

from conftest import ROOT, VENV_BIN, ansible_env

# tools/test.sh runs each scenario as a unit of its own, the longest first (tests/costs.json).
SCENARIOS = sorted(p.parent.name for p in (ROOT / "molecule").glob("*/molecule.yml"))


@pytest.fixture(scope="session")
def lab_image() -> str:
    proc = subprocess.run(
        [str(ROOT / "tools" / "lab" / "build-image.sh")], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().splitlines()[-1]


@pytest.mark.lab
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_molecule_scenario(scenario, lab_image):
    proc = subprocess.run(
        [str(VENV_BIN / "molecule"), "test", "-s", scenario],
        cwd=ROOT, env=ansible_env(LAB_IMAGE=lab_image), capture_output=True, text=True, check=False,
    )
    assert proc.returncode == 0, proc.stdout[-30000:] + proc.stderr[-10000:]
