"""Every row of every role's table, judged on a node laid out under a temporary root.

Each role's table (vars/main.yml's __<role>_files) is rendered by Ansible's own templating
(tests/role_vars.py) with the role's defaults, put in force by plugin_utils/managed.py as a plan
does, and laid out under tmp_path exactly as the rows say: directories, files with their
content, links, nothing where a row wants nothing. Read back with the module's reader
(module_utils/file_state.path_state), no row is off; each row tampered with alone (taken away,
or changed the way its kind can change) is off with its own reason, and no other row is. A row
added to any table is in this test without an edit here.
"""
from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils.file_state import path_state
from ansible_collections.blackwell.sglang.plugins.plugin_utils import managed
import role_vars

# What each role's table needs beyond its defaults to render as it does on a node: the facts
# the roles read, and the release the service's active-release link points at (playbooks/node.yml
# hands the install's over).
DEBIAN12 = {"distribution": "Debian", "distribution_version": "12.12", "distribution_major_version": "12",
            "architecture": "x86_64", "gpu": {"capability_majors": [12]}}
OVERRIDES = {
    "cuda13": {"ansible_facts": DEBIAN12},
    "sglang_install": {"ansible_facts": DEBIAN12},
    "sglang_service": {"sglang_service_release_path": "/opt/sglang/releases/0.5.8"},
    "sglang_router": {},
}


def _rows(role: str) -> list[dict]:
    """ROLE's rows in force, each file with a content of its own (the text of a template or a
    source named after it: this test judges the rows, not the templates)."""
    table = role_vars.render(role, f"__{role}_files", OVERRIDES[role])
    names = {row.get("template") or row.get("source") for row in table} - {None}
    text = {name: f"{role}: the content of {name}\n" for name in names}
    return managed.in_force(role, table, text, text)


# Each table rendered once, for the parameters of the tests below.
_TABLES = {role: _rows(role) for role in sorted(OVERRIDES)}
ROWS = [(role, index) for role, rows in _TABLES.items() for index in range(len(rows))]
# A row that wants nothing changes only by being there: the rows the other rows' changes apply to.
CHANGEABLE = [(role, index) for role, index in ROWS if _TABLES[role][index]["state"] != "absent"]


def _under(root: Path, path: str) -> Path:
    return root / path.lstrip("/")


def _lay_out(root: Path, rows: list[dict]) -> None:
    """The node as the rows leave it, every path under ROOT; a link's target is made where no
    row makes it (the release a link points at)."""
    for row in rows:
        path = _under(root, row["path"])
        if row["state"] == "directory":
            path.mkdir(parents=True, exist_ok=True)
            path.chmod(int(row["mode"], 8))
        elif row["state"] == "file":
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(row["content"], encoding="utf-8")
            path.chmod(int(row["mode"], 8))
        elif row["state"] == "link":
            _under(root, row["src"]).mkdir(parents=True, exist_ok=True)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.symlink_to(row["src"])


def _read(root: Path, rows: list[dict]) -> dict:
    """What the roles' readers return for each row's path (and a link row's target), keyed by
    the path on the node. The owners are read as the rows' own: a test cannot make the service
    account's files."""
    paths = {}
    for row in rows:
        for path in [row["path"]] + ([row["src"]] if row["state"] == "link" else []):
            found = path_state(str(_under(root, path)))
            if found.get("islink"):
                # A link row points at an absolute path on the node: read it as the node would.
                found["link"] = os.readlink(_under(root, path))
            if found.get("exists"):
                found.update(owner=row["owner"], group=row["group"])
            paths[path] = found
    return paths


def _off(root: Path, rows: list[dict]) -> dict:
    read = _read(root, rows)
    return {row["path"]: managed.off_in(row, read) for row in rows if managed.off_in(row, read)}


@pytest.fixture(name="node")
def node_fixture(tmp_path):
    def lay_out(role):
        rows = _rows(role)
        _lay_out(tmp_path, rows)
        return tmp_path, rows
    return lay_out


def test_every_role_with_a_table_is_here():
    roles = {path.parent.parent.name for path in role_vars.ROOT.glob("roles/*/vars/main.yml")
             if f"__{path.parent.parent.name}_files:" in path.read_text(encoding="utf-8")}
    assert roles == set(OVERRIDES)


@pytest.mark.parametrize("role", sorted(OVERRIDES))
def test_a_node_laid_out_from_the_table_has_no_row_off(node, role):
    root, rows = node(role)
    assert rows and _off(root, rows) == {}


@pytest.mark.parametrize("role, index", ROWS)
def test_each_row_taken_away_alone_is_off_with_its_reason(node, role, index):
    root, rows = node(role)
    row = rows[index]
    path = _under(root, row["path"])
    if row["state"] == "absent":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("left behind\n", encoding="utf-8")
        assert _off(root, rows) == {row["path"]: f"{row['path']} is present and is removed"}
        return
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()
    # What sat under a directory taken away is missing with it, and a link into it points at
    # what is missing.

    def under(path):
        return path == row["path"] or path.startswith(row["path"].rstrip("/") + "/")
    gone = {other["path"]: f"{other['path']} is missing" for other in rows if other["state"] != "absent" and under(other["path"])}
    gone.update({other["path"]: f"{other['path']} points at {other['src']}, which is missing" for other in rows
                 if other["state"] == "link" and not under(other["path"]) and under(other["src"])})
    assert _off(root, rows) == gone


@pytest.mark.parametrize("role, index", CHANGEABLE)
def test_each_row_changed_alone_is_off_with_its_reason(node, role, index):
    root, rows = node(role)
    row = rows[index]
    path = _under(root, row["path"])
    if row["state"] == "link":
        path.unlink()
        path.symlink_to("/elsewhere")
        assert _off(root, rows) == {row["path"]: f"{row['path']} points at /elsewhere, not {row['src']}"}
        return
    mode = "0700" if row["mode"] != "0700" else "0750"
    if row["state"] == "directory":
        path.chmod(int(mode, 8))
        # A directory a row keeps is taken as the node holds it.
        assert _off(root, rows) == ({} if row.get("keep") else {row["path"]: f"{row['path']}: mode {mode}, not {row['mode']}"})
        return
    path.write_text(row["content"] + "tampered\n", encoding="utf-8")
    assert hashlib.sha1(path.read_bytes()).hexdigest() != row["checksum"]
    assert _off(root, rows) == {row["path"]: f"{row['path']}: content differs"}
    path.write_text(row["content"], encoding="utf-8")
    path.chmod(int(mode, 8))
    assert _off(root, rows) == {row["path"]: f"{row['path']}: mode {mode}, not {row['mode']}"}
