"""Real SGLang releases from PyPI, for tests that patch SGLang's own files.

Wheels are downloaded once with `pip download --no-deps` into the repository's cache and
only the few files a test needs are unpacked into a site-packages tree under a temp dir.
"""
from __future__ import annotations

import fcntl
import subprocess
import sys
import zipfile
from pathlib import Path

from conftest import CACHE

DEVICE_COMMUNICATORS = "sglang/srt/distributed/device_communicators"
TARGET_FILES = (
    f"{DEVICE_COMMUNICATORS}/all_reduce_utils.py",
    f"{DEVICE_COMMUNICATORS}/torch_symm_mem.py",
)
# Every release from the first with torch_symm_mem.py to the newest checked (0.5.23), post
# releases included; 0.5.4 is the last one without it.
RELEASES = (
    "0.5.5", "0.5.5.post1", "0.5.5.post2", "0.5.5.post3",
    "0.5.6", "0.5.6.post1", "0.5.6.post2", "0.5.7",
    "0.5.8", "0.5.8.post1", "0.5.9", "0.5.10", "0.5.10.post1",
    "0.5.11", "0.5.12", "0.5.12.post1", "0.5.13", "0.5.13.post1",
    "0.5.14", "0.5.15", "0.5.15.post1", "0.5.16", "0.5.17", "0.5.18",
    "0.5.19", "0.5.20", "0.5.21", "0.5.22", "0.5.23",
)
BEFORE_SYMM_MEM = "0.5.4"
WHEELS = CACHE / "wheels"


def cached_wheel(spec: str) -> Path:
    """The cached wheel of SPEC (name==version) for CPython 3.11 on x86_64 Linux, downloaded from
    PyPI when missing."""
    name, version = spec.split("==")
    WHEELS.mkdir(parents=True, exist_ok=True)
    with open(WHEELS / ".lock", "w") as lock:
        # Several test processes may ask for the same wheel at once.
        fcntl.flock(lock, fcntl.LOCK_EX)
        # Wheel file names spell a project's name with underscores (nvidia-nccl-cu13: nvidia_nccl_cu13-...).
        pattern = f"{name.replace('-', '_')}-{version}-*.whl"
        found = sorted(WHEELS.glob(pattern))
        if not found:
            # Newer SGLang releases are CPython 3.11 platform wheels; the files the tests read are
            # the same Python sources whichever interpreter the machine running the tests has.
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                 "--only-binary=:all:", "--python-version", "3.11", "--implementation", "cp",
                 "--abi", "cp311", "--platform", "manylinux_2_34_x86_64",
                 "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux_2_18_x86_64",
                 "--platform", "manylinux_2_17_x86_64", "--platform", "manylinux2014_x86_64",
                 "--platform", "any", "--dest", str(WHEELS), spec],
                check=True, capture_output=True, text=True,
            )
            found = sorted(WHEELS.glob(pattern))
        assert len(found) == 1, found
        return found[0]


def wheel(version: str) -> Path:
    """The cached wheel of sglang==version, downloaded from PyPI when missing."""
    return cached_wheel(f"sglang=={version}")


def install_tree(version: str, dest: Path) -> Path:
    """Unpack the package files the module touches, plus METADATA, into dest/site-packages,
    with a RECORD of exactly those files (the wheel's lines for them), as an installer records
    what it installed: a read that checks the RECORD finds the tree complete.

    Returns the sglang package directory.
    """
    site = dest / "site-packages"
    with zipfile.ZipFile(wheel(version)) as archive:
        names = set(archive.namelist())
        wanted = [n for n in (*TARGET_FILES, "sglang/__init__.py") if n in names]
        wanted += [n for n in names if n.endswith(".dist-info/METADATA")]
        for name in wanted:
            target = site / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(archive.read(name))
        record = next(n for n in names if n.startswith("sglang-") and n.endswith(".dist-info/RECORD"))
        lines = [line for line in archive.read(record).decode().splitlines() if line.split(",", 1)[0] in wanted]
        (site / record).write_text("".join(line + "\n" for line in lines) + f"{record},,\n")
    return site / "sglang"


def original(version: str, rel: str) -> bytes:
    """A file of the release straight from its wheel (rel is relative to the package)."""
    with zipfile.ZipFile(wheel(version)) as archive:
        return archive.read(f"sglang/{rel}")
