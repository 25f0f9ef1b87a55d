"""ansible-lint, production profile, no skips: the whole collection."""
from __future__ import annotations

import subprocess

from conftest import ROOT, VENV_BIN, ansible_env


def test_ansible_lint_production_profile_is_clean():
    proc = subprocess.run(
        [str(VENV_BIN / "ansible-lint"), "--profile", "production", "--nocolor"],
        cwd=ROOT, env=ansible_env(), capture_output=True, text=True, check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
