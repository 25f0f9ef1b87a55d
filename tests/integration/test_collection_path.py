"""tools/collection-path.sh links this checkout where only the caller can write, and refuses a
directory someone else could have planted a collection in."""
from __future__ import annotations

import os
import pwd
import subprocess

from conftest import ROOT

SCRIPT = str(ROOT / "tools" / "collection-path.sh")


def run(tmp_path):
    env = {key: value for key, value in os.environ.items() if key != "XDG_RUNTIME_DIR"}
    env["XDG_CACHE_HOME"] = str(tmp_path)
    return subprocess.run([SCRIPT], env=env, capture_output=True, text=True, check=False)


def test_links_the_checkout_in_a_private_directory(tmp_path):
    proc = run(tmp_path)
    assert proc.returncode == 0, proc.stderr
    base = proc.stdout.strip()
    private = tmp_path / f"blackwell-sglang-{os.getuid()}"
    assert os.path.dirname(base) == str(private)
    assert oct(private.stat().st_mode & 0o777) == "0o700"
    assert os.path.realpath(os.path.join(base, "ansible_collections/blackwell/sglang")) == str(ROOT.resolve())
    # Again: the same directory, nothing rewritten.
    assert run(tmp_path).stdout.strip() == base


def test_refuses_a_directory_others_can_write(tmp_path):
    private = tmp_path / f"blackwell-sglang-{os.getuid()}"
    private.mkdir(mode=0o777)
    private.chmod(0o777)
    proc = run(tmp_path)
    assert proc.returncode == 1
    assert proc.stderr.strip() == (f"collection-path: {private} is not a directory of user {os.getuid()} "
                                   f"with mode 0700; refusing to use it")
    assert list(private.iterdir()) == []


def test_never_falls_back_to_a_shared_tmp_or_a_kept_home(tmp_path):
    # Without XDG variables it uses the caller's home from the password database: not /tmp,
    # and not a HOME that sudo kept from the user who ran it.
    env = {key: value for key, value in os.environ.items() if key not in ("XDG_RUNTIME_DIR", "XDG_CACHE_HOME")}
    env.update(HOME=str(tmp_path / "someone-else"), TMPDIR="/tmp")
    proc = subprocess.run([SCRIPT], env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    home = pwd.getpwuid(os.getuid()).pw_dir
    assert os.path.dirname(proc.stdout.strip()) == os.path.join(home, ".cache", f"blackwell-sglang-{os.getuid()}")
    assert not (tmp_path / "someone-else").exists()


def test_refuses_a_parent_others_can_write(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    env = {key: value for key, value in os.environ.items() if key != "XDG_RUNTIME_DIR"}
    env["XDG_CACHE_HOME"] = str(shared)
    proc = subprocess.run([SCRIPT], env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 1
    assert proc.stderr.strip() == f"collection-path: {shared} does not belong to user {os.getuid()} alone; refusing to use it"
    assert list(shared.iterdir()) == []


def test_refuses_a_link_planted_in_its_place(tmp_path):
    elsewhere = tmp_path / "planted"
    elsewhere.mkdir(mode=0o700)
    (tmp_path / f"blackwell-sglang-{os.getuid()}").symlink_to(elsewhere)
    proc = run(tmp_path)
    assert proc.returncode == 1
    assert "refusing to use it" in proc.stderr
    assert list(elsewhere.iterdir()) == []
