"""blackwell.sglang.sglang_rollback through Ansible on localhost: what each state reports and
writes, check mode writing nothing, and a record this collection did not write refused by name."""
from __future__ import annotations

import os

import pytest

from conftest import run_local_module

MODULE = "blackwell.sglang.sglang_rollback"


def run_module(args: dict, *flags: str) -> tuple[int, dict]:
    return run_local_module(MODULE, args, *flags)


def tree(path) -> dict:
    """Every file under PATH with its content, mode and link target."""
    found = {}
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            full = os.path.join(root, name)
            st = os.lstat(full)
            found[full] = (os.readlink(full) if os.path.islink(full)
                           else open(full, "rb").read() if os.path.isfile(full) else None, st.st_mode)
    return found


@pytest.fixture
def node(tmp_path):
    for name in ("old", "new"):
        (tmp_path / "releases" / name / "bin").mkdir(parents=True)
        (tmp_path / "releases" / name / "bin" / "python").write_text("")
    (tmp_path / "current").symlink_to(tmp_path / "releases" / "old")
    (tmp_path / "unit").write_text("old unit\n")
    return {"root": tmp_path, "record": str(tmp_path / "state" / "rollback"),
            "save": {"state": "saved", "path": str(tmp_path / "state" / "rollback"),
                     "link": str(tmp_path / "current"), "files": [str(tmp_path / "unit"), str(tmp_path / "tp")]}}


def switch(node) -> None:
    root = node["root"]
    (root / "current").unlink()
    (root / "current").symlink_to(root / "releases" / "new")
    (root / "unit").write_text("new unit\n")
    (root / "tp").write_text("8\n")


def test_each_state_in_check_mode_reports_and_writes_nothing(node):
    before = tree(node["root"])
    rc, res = run_module(node["save"], "--check")
    assert (rc, res["changed"], res["kept"]) == (0, True, False), res
    assert res["record"]["release"] == str(node["root"] / "releases" / "old")
    assert tree(node["root"]) == before
    assert run_module(node["save"])[1]["changed"] is True
    switch(node)
    before = tree(node["root"])
    rc, res = run_module({"state": "restored", "path": node["record"]}, "--check")
    assert (rc, res["changed"]) == (0, True)
    assert res["restored"] == {"release": str(node["root"] / "releases" / "old"), "files": [str(node["root"] / "unit")],
                               "remove": [str(node["root"] / "tp")]}
    rc, res = run_module({"state": "absent", "path": node["record"]}, "--check")
    assert (rc, res["changed"]) == (0, True)
    assert res["msg"].startswith(f"a rollout that did not finish left its rollback record {node['record']} (saved ")
    assert tree(node["root"]) == before


def test_a_kept_record_warns_then_restores_and_goes(node):
    assert run_module(node["save"])[1]["changed"] is True
    switch(node)
    rc, res = run_module(node["save"])
    assert (rc, res["changed"], res["kept"]) == (0, False, True)
    assert "holds the rollback record of a rollout that did not finish" in res["warnings"][0]
    rc, res = run_module({"state": "restored", "path": node["record"]})
    assert (rc, res["changed"]) == (0, True)
    assert os.readlink(node["root"] / "current") == str(node["root"] / "releases" / "old")
    assert (node["root"] / "unit").read_text() == "old unit\n" and not (node["root"] / "tp").exists()
    assert run_module({"state": "restored", "path": node["record"]})[1]["changed"] is False
    rc, res = run_module({"state": "absent", "path": node["record"]})
    assert (rc, res["changed"]) == (0, True) and not os.path.exists(node["record"])
    assert run_module({"state": "absent", "path": node["record"]})[1]["changed"] is False
    assert run_module({"state": "restored", "path": node["record"]})[1]["restored"] == {
        "release": "", "files": [], "remove": []}


def test_a_record_not_written_by_this_collection_is_refused_by_name(node):
    os.makedirs(node["record"])
    with open(os.path.join(node["record"], "record.json"), "w") as handle:
        handle.write("{not json")
    rc, res = run_module({"state": "restored", "path": node["record"]})
    assert rc == 2
    assert res["msg"].startswith(f"sglang_rollback: the rollback record {node['record']}/record.json is not JSON: ")


def test_a_record_without_a_link_keeps_and_puts_back_the_files_alone(node):
    """The router's record: its unit names its release, so there is no link to keep."""
    save = {key: value for key, value in node["save"].items() if key != "link"}
    rc, res = run_module(save)
    assert (rc, res["changed"], res["record"]["link"], res["record"]["release"]) == (0, True, "", ""), res
    switch(node)
    rc, res = run_module({"state": "restored", "path": node["record"]})
    assert (rc, res["changed"]) == (0, True), res
    assert res["restored"] == {"release": "", "files": [str(node["root"] / "unit")], "remove": [str(node["root"] / "tp")]}
    assert (node["root"] / "unit").read_text() == "old unit\n" and not (node["root"] / "tp").exists()
    # The link is no part of such a record: it stays where the switch put it.
    assert os.readlink(node["root"] / "current") == str(node["root"] / "releases" / "new")


def test_a_half_removed_record_is_cleared_with_a_warning_not_failed_on(node):
    assert run_module(node["save"])[1]["changed"] is True
    os.unlink(os.path.join(node["record"], "record.json"))
    before = tree(node["root"])
    warning = (f"sglang_rollback: {node['record']} is a rollback record without its record.json (a run was killed "
               "while removing it); it {} cleared, and this run goes on as if there were no record")
    rc, res = run_module({"state": "restored", "path": node["record"]}, "--check")
    assert (rc, res["changed"], res["warnings"]) == (0, True, [warning.format("would be")]), res
    assert tree(node["root"]) == before
    rc, res = run_module({"state": "restored", "path": node["record"]})
    assert (rc, res["changed"], res["restored"], res["warnings"]) == (
        0, True, {"release": "", "files": [], "remove": []}, [warning.format("was")]), res
    assert not os.path.lexists(node["record"]) and os.listdir(node["root"] / "state") == []
    assert os.readlink(node["root"] / "current") == str(node["root"] / "releases" / "old")


def test_a_restore_to_a_release_that_is_gone_fails_by_name_and_changes_nothing(node):
    assert run_module(node["save"])[1]["changed"] is True
    switch(node)
    gone = node["root"] / "releases" / "old"
    (gone / "bin" / "python").unlink()
    before = tree(node["root"])
    for flags in (("--check",), ()):
        rc, res = run_module({"state": "restored", "path": node["record"]}, *flags)
        assert rc == 2, res
        assert res["msg"] == (f"sglang_rollback: the release {gone} that the rollback record points back to is gone "
                              f"(no {gone}/bin/python): nothing was put back, the node is left as it is")
        assert tree(node["root"]) == before


def test_keep_current_files_are_noted_not_copied_and_never_put_back(node):
    secrets = node["root"] / "secrets.env"
    secrets.write_text("KEY=old\n")
    args = dict(node["save"], files=node["save"]["files"] + [str(secrets)], keep_current=[str(secrets)])
    rc, res = run_module(args)
    assert (rc, res["record"]["files"]) == (0, [str(node["root"] / "unit"), str(secrets)]), res
    assert len(os.listdir(os.path.join(node["record"], "files"))) == 1
    switch(node)
    secrets.write_text("KEY=rotated\n")
    rc, res = run_module({"state": "restored", "path": node["record"]})
    assert res["restored"]["files"] == [str(node["root"] / "unit")], res
    assert secrets.read_text() == "KEY=rotated\n"
