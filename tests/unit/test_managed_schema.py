"""The one schema of the roles' tables (plugins/plugin_utils/managed.py): every role's table as
vars/main.yml holds it follows it, and a table that does not is refused by the role's plan,
naming the role, the row and the column, before the plan compares anything with the node."""
from __future__ import annotations

import re

import pytest
import yaml

from ansible_collections.blackwell.sglang.plugins.plugin_utils import cuda_plan, managed
from conftest import ROOT

# Each role with a table, and the table's name in its vars/main.yml: __<role>_files.
TABLES = {role: f"__{role}_files" for role in ("cuda13", "sglang_install", "sglang_service", "sglang_router")}


def table(role: str) -> list:
    return yaml.safe_load((ROOT / "roles" / role / "vars" / "main.yml").read_text(encoding="utf-8"))[TABLES[role]]


@pytest.mark.parametrize("role", sorted(TABLES))
def test_each_roles_table_follows_the_schema(role):
    rows = table(role)
    assert rows, role
    assert managed.problems(role, rows) == []


def test_no_role_names_its_table_otherwise():
    """A table is found by its name: every vars/main.yml key holding rows with a path is
    __<role>_files."""
    for vars_file in sorted((ROOT / "roles").glob("*/vars/main.yml")):
        role = vars_file.parent.parent.name
        for name, value in (yaml.safe_load(vars_file.read_text(encoding="utf-8")) or {}).items():
            if isinstance(value, list) and value and all(isinstance(row, dict) and "path" in row for row in value):
                assert name == f"__{role}_files", (role, name)


ENV = {"path": "/etc/sglang/sglang.env", "mode": "0600", "template": "sglang.env.j2", "secret": True}


@pytest.mark.parametrize("row, problem", [
    (dict(ENV, mdoe="0600"), "unknown column 'mdoe'"),
    ({key: value for key, value in ENV.items() if key != "mode"}, "a file row needs the column 'mode'"),
    ({"path": "/etc/sglang", "state": "dir", "mode": "0755"}, "unknown state 'dir' (one of file, directory, link, absent, record, venv)"),
    ({"path": "/etc/sglang/sglang.env", "mode": "0600"},
     "a file row needs exactly one of the columns 'template' and 'source'"),
    (dict(ENV, source="env"), "a file row needs exactly one of the columns 'template' and 'source'"),
    ({"path": "/etc/sglang", "state": "directory", "mode": "0755", "template": "x.j2"},
     "a directory row has no content ('template')"),
    ({"path": "/opt/sglang/current", "state": "link"}, "a link row needs the column 'src'"),
])
def test_a_row_off_the_schema_is_named_with_its_role_number_path_and_column(row, problem):
    rows = [{"path": "/etc/sglang", "state": "directory", "mode": "0755"}, row]
    assert managed.problems("sglang_service", rows) == [
        f"sglang_service's table, row 2 ({row['path']}): {problem}"]


def test_a_row_without_a_path_and_a_row_that_is_no_mapping_are_named():
    assert managed.problems("cuda13", [{"mode": "0644", "source": "key"}, "/etc/x"]) == [
        "cuda13's table, row 1 (no path): a file row needs the column 'path'",
        "cuda13's table, row 2 (/etc/x): a row is a mapping of columns",
    ]


def test_a_plan_refuses_a_table_off_the_schema_before_it_reads_the_node():
    rows = [dict(row) for row in table("cuda13")]
    rows[1]["refersh"] = rows[1].pop("mode")
    with pytest.raises(ValueError) as error:
        cuda_plan.file_rows(rows, {}, {})
    assert str(error.value) == (
        f"cuda13's table, row 2 ({rows[1]['path']}): unknown column 'refersh'; "
        f"cuda13's table, row 2 ({rows[1]['path']}): a file row needs the column 'mode'")


def test_a_removal_value_off_the_schema_is_named_and_a_templated_one_waits_for_its_rendering():
    rows = [{"path": "/etc/sglang", "state": "directory", "mode": "0755", "removal": "spare"},
            {"path": "/etc/sglang/x", "state": "record", "removal": "{{ 'keep' if shared else 'remove' }}"},
            {"path": "/etc/sglang/y", "state": "record", "source": "y"}]
    assert managed.problems("sglang_service", rows) == [
        "sglang_service's table, row 1 (/etc/sglang): removal 'spare' is not one of remove, keep",
        "sglang_service's table, row 3 (/etc/sglang/y): a record row has no content ('source')"]


RENDERED = [
    {"path": "/opt/sglang/current", "state": "link", "src": "/opt/sglang/releases/0.5.8", "removal": "keep"},
    {"path": "/etc/sglang", "state": "directory", "mode": "0755", "removal": "keep"},
    {"path": "/var/lib/sglang/.cache/huggingface", "state": "directory", "mode": "0750", "keep": True},
    {"path": "", "state": "directory", "mode": "0750"},
    {"path": "/etc/sglang/sglang.env", "mode": "0600", "template": "sglang.env.j2", "secret": True},
    {"path": "/etc/sglang/cuda-toolkit", "mode": "0644", "source": "cuda-toolkit", "enabled": False},
    {"path": "/etc/sglang/sglang.env", "mode": "0600", "template": "sglang.env.j2"},
    {"path": "/etc/sglang/nccl-smoke.json", "state": "record"},
]


def test_removal_takes_every_row_last_first_once_even_out_of_force_but_the_kept_ones():
    assert managed.removal("sglang_service", RENDERED) == [
        "/etc/sglang/nccl-smoke.json", "/etc/sglang/sglang.env", "/etc/sglang/cuda-toolkit"]


def test_a_path_under_a_directory_the_removal_takes_goes_with_it():
    rows = [dict(RENDERED[1], removal="remove"), *RENDERED[4:]]
    assert managed.removal("sglang_service", rows) == ["/etc/sglang"]


def test_a_path_one_row_keeps_is_kept_whatever_another_row_says():
    rows = [*RENDERED[4:], dict(RENDERED[4], removal="keep")]
    assert managed.removal("sglang_service", rows) == ["/etc/sglang/nccl-smoke.json", "/etc/sglang/cuda-toolkit"]


def test_a_record_is_never_in_force_so_never_judged_nor_written():
    rows = managed.in_force("sglang_service", RENDERED[4:6] + RENDERED[7:], {"sglang.env.j2": "K=v\n"})
    assert [row["path"] for row in rows] == ["/etc/sglang/sglang.env"]


def test_the_removal_filter_names_a_row_off_the_schema():
    from ansible.errors import AnsibleFilterError
    from ansible_collections.blackwell.sglang.plugins.filter.removal_paths import removal_paths
    assert removal_paths(RENDERED, "sglang_service") == managed.removal("sglang_service", RENDERED)
    with pytest.raises(AnsibleFilterError) as error:
        removal_paths([{"path": "/etc/x", "state": "gone"}], "sglang_router")
    assert str(error.value) == "sglang_router's table, row 1 (/etc/x): unknown state 'gone' (one of file, directory, link, absent, record, venv)"


def test_the_how_to_documents_every_column_of_the_schema():
    text = (ROOT / "docs" / "managed-files.md").read_text(encoding="utf-8")
    section = text.split("## The columns", 1)[1].split("\n## ", 1)[0]
    documented = set()
    for line in section.splitlines():
        if line.startswith("| `"):
            documented.update(re.findall(r"`([a-z_]+)`", line.split(" | ", 1)[0]))
    assert documented == set(managed.COLUMNS)


def test_the_installs_removal_takes_the_link_uv_the_releases_and_the_home_and_what_they_hold_with_them():
    """sglang_install's table as Ansible renders it with its defaults: the files the table puts
    in uv's venv and in the release go with their directories; uv's venv is never in force."""
    import role_vars  # pylint: disable=import-outside-toplevel
    rows = role_vars.render("sglang_install", "__sglang_install_files")
    assert managed.removal("sglang_install", rows) == [
        "/opt/sglang/current", "/opt/sglang/uv", "/opt/sglang/releases", "/var/lib/sglang"]
    assert "/opt/sglang/uv" not in [row["path"] for row in managed.in_force(
        "sglang_install", rows, dict.fromkeys([row["template"] for row in rows if "template" in row], ""))]


def test_each_write_task_of_the_router_loops_over_exactly_its_rows():
    """The router's tasks pick their rows from the table by its columns: each row is written by
    exactly one task (the venv by the install, the rollback record's directory by
    blackwell.sglang.sglang_rollback), and each loop renders as Ansible renders it."""
    import role_vars  # pylint: disable=import-outside-toplevel
    tasks = yaml.safe_load((ROOT / "roles" / "sglang_router" / "tasks" / "present.yml").read_text(encoding="utf-8"))
    written = {}
    for task in tasks:
        loop = task.get("loop")
        if isinstance(loop, str) and "__sglang_router_files" in loop:
            written[task["name"]] = [row["path"] for row in role_vars.render_expression("sglang_router", loop)]
    assert written == {
        "Create the router's venvs' and sources' directories": ["/opt/sglang-router", "/etc/sglang-router"],
        "Write pip's sources for the router": ["/etc/sglang-router/pip.conf"],
        "Create the launcher's directory": ["/usr/local/lib/sglang-router"],
        "Write the router's secrets file": ["/etc/sglang-router/router.env"],
        "Write the router's launcher": ["/usr/local/lib/sglang-router/sglang_router_launch.py"],
        "Write the router's unit": ["/etc/systemd/system/sglang-router.service"],
    }
    rows = role_vars.render("sglang_router", "__sglang_router_files")
    assert sorted(path for paths in written.values() for path in paths) == sorted(
        row["path"] for row in rows if row.get("state") not in ("venv", "record"))
    assert [row["path"] for row in rows if row.get("state") == "record"] == ["/var/lib/sglang-router"]
