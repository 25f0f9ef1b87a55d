"""The CUDA toolkit reader (plugins/module_utils/cuda_toolkit.py) on listings written here."""
from __future__ import annotations

import os

from ansible_collections.blackwell.sglang.plugins.module_utils import cuda_toolkit, file_state

# What `dpkg-query -W -f "${db:Status-Abbrev}\t${Package}\t${Version}\n"` prints: three status
# letters padded with a space when the error flag is clear.
LISTING = (
    "hi \tcuda-toolkit-13-0\t13.0.2-1\n"
    "ii \tcuda-toolkit-12-8\t12.8.1-1\n"
    "rc \tcuda-nvcc-12-6\t12.6.85-1\n"
    "ii \tpython3-apt\t2.6.0\n"
    "un \tpython3-apt-dbg\t\n"
    "ii \tcuda-toolkit-13-0-config-common\t13.0.96-1\n"
    "not a package line\n"
)
PREVIOUS = r"^(cuda-[a-z0-9-]+-12(-[0-9]+)?-config-common|cuda-[a-z0-9-]+-12-[0-9]+|lib[a-z0-9]+(-dev)?-12-[0-9]+)$"


def test_packages_matching_in_full_with_their_state():
    found = cuda_toolkit.packages(LISTING, ["cuda-toolkit-13-0", PREVIOUS, "python3-apt"])
    assert found == {
        "cuda-toolkit-13-0": {"version": "13.0.2-1", "installed": True, "held": True},
        "cuda-toolkit-12-8": {"version": "12.8.1-1", "installed": True, "held": False},
        # Removed, its configuration kept: dpkg remembers it, it is not installed.
        "cuda-nvcc-12-6": {"version": "12.6.85-1", "installed": False, "held": False},
        "python3-apt": {"version": "2.6.0", "installed": True, "held": False},
    }


def test_no_pattern_no_package():
    assert cuda_toolkit.packages(LISTING, []) == {}


def test_alternatives_where_they_point_and_empty_without_a_link(tmp_path):
    (tmp_path / "cuda").symlink_to("/usr/local/cuda-13.0")
    (tmp_path / "plain").write_text("not a link")
    assert cuda_toolkit.alternatives(["cuda", "cuda-13", "plain"], directory=str(tmp_path)) == {
        "cuda": "/usr/local/cuda-13.0", "cuda-13": "", "plain": ""}


def test_path_state_of_a_file_a_link_a_directory_and_nothing(tmp_path):
    target = tmp_path / "file"
    target.write_bytes(b"export CUDA_HOME=/usr/local/cuda\n")
    target.chmod(0o640)
    (tmp_path / "link").symlink_to(target)
    owner = file_state.path_state(str(target))["owner"]
    assert file_state.path_state(str(target)) == {
        "exists": True, "isdir": False, "islink": False, "mode": "0640", "owner": owner,
        "group": file_state.group_name(os.stat(target).st_gid),
        # sha1 of the content, as copy and template compare it
        "checksum": "469b363f4ea265bfc98aa5220498253510b1c152"}
    link = file_state.path_state(str(tmp_path / "link"))
    assert (link["islink"], link["link"], "checksum" in link) == (True, str(target), False)
    assert file_state.path_state(str(tmp_path))["isdir"] is True
    assert file_state.path_state(str(tmp_path / "nothing")) == {"exists": False}
