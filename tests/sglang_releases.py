"""Real SGLang releases from PyPI for tests: the wheel (cached under .cache/wheels by
tools/lab/sglang-wheel.sh) unpacked partially, only the files a static reader looks at."""
from __future__ import annotations

import subprocess
import zipfile
from pathlib import Path

from conftest import ROOT

MEMBERS = (
    "sglang/srt/server_args.py",
    "sglang/srt/arg_groups/",
    "sglang/srt/layers/flashinfer_comm_fusion.py",
    "sglang/srt/environ.py",
    "sglang/srt/entrypoints/http_server.py",
    "sglang/srt/distributed/device_communicators/",
    "sglang/version.py",
    "sglang/_version.py",
)


def wheel(version: str) -> Path:
    proc = subprocess.run(
        [str(ROOT / "tools" / "lab" / "sglang-wheel.sh"), version], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return Path(proc.stdout.strip().splitlines()[-1])


def unpack(version: str, dest: Path) -> Path:
    """Unpack the release's argument and hazard sources into dest; returns dest/sglang."""
    with zipfile.ZipFile(wheel(version)) as archive:
        for name in archive.namelist():
            if name.startswith(MEMBERS) or (name.endswith(".dist-info/METADATA") and name.startswith("sglang-")):
                archive.extract(name, dest)
    return dest / "sglang"


def install(version: str, site: Path) -> Path:
    """Every file of the release's wheel into the site-packages directory site, as an installer
    lays them out (a wheel's RECORD lists the digests of the files as they are installed);
    returns its dist-info directory."""
    with zipfile.ZipFile(wheel(version)) as archive:
        archive.extractall(site)
    found = sorted(site.glob("sglang-*.dist-info"))
    assert len(found) == 1, found
    return found[0]
