"""The rollback record on real files: saved before a switch, kept when a run left one, put back
exactly (content, mode, link, files that did not exist), complete or absent; and the releases a
prune must spare (tests/unit, no node needed)."""
from __future__ import annotations

import json
import os

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils import rollback_record
from ansible_collections.blackwell.sglang.plugins.plugin_utils import releases


@pytest.fixture
def node(tmp_path):
    """A node's layout in a temporary directory: two releases, the link on the first, a unit and
    a secrets file; the TP record does not exist yet."""
    for name in ("0.5.8", "0.5.23"):
        (tmp_path / "releases" / name / "bin").mkdir(parents=True)
        (tmp_path / "releases" / name / "bin" / "python").write_text("")
    link = tmp_path / "current"
    link.symlink_to(tmp_path / "releases" / "0.5.8")
    (tmp_path / "sglang.service").write_text("ExecStart=old\n")
    secrets = tmp_path / "sglang.env"
    secrets.write_text("SGLANG_API_KEY=old\n")
    secrets.chmod(0o600)
    files = [str(tmp_path / name) for name in ("sglang.service", "sglang.env", "tp-size")]
    return {"root": tmp_path, "link": str(link), "files": files, "record": str(tmp_path / "state" / "rollback")}


def switch(node):
    """What a rollout does after the record: the link moved, every file rewritten or made."""
    root = node["root"]
    os.unlink(node["link"])
    os.symlink(str(root / "releases" / "0.5.23"), node["link"])
    (root / "sglang.service").write_text("ExecStart=new\n")
    (root / "sglang.env").write_text("SGLANG_API_KEY=new\n")
    (root / "sglang.env").chmod(0o644)
    (root / "tp-size").write_text("8\n")


def test_a_saved_record_is_root_only_and_holds_the_node_as_it_was(node):
    record, kept = rollback_record.save(node["record"], node["link"], node["files"], now=0)
    assert kept is False
    assert oct(os.stat(node["record"]).st_mode & 0o777) == "0o700"
    manifest = json.load(open(os.path.join(node["record"], "record.json")))
    assert manifest == record
    assert record["release"] == str(node["root"] / "releases" / "0.5.8")
    assert record["saved"] == "1970-01-01T00:00:00Z"
    assert [(f["path"], f["exists"], f.get("mode")) for f in record["files"]] == [
        (node["files"][0], True, "0644"), (node["files"][1], True, "0600"), (node["files"][2], False, None)]
    copy = os.path.join(node["record"], record["files"][1]["copy"])
    assert open(copy).read() == "SGLANG_API_KEY=old\n"
    assert os.stat(copy).st_mode & 0o777 == 0o600
    assert not os.path.exists(node["record"] + ".new")
    assert rollback_record.summary(record) == {
        "saved": "1970-01-01T00:00:00Z", "link": node["link"], "release": record["release"],
        "files": node["files"][:2], "absent": node["files"][2:]}


def test_a_record_left_by_an_unfinished_run_is_kept_not_replaced(node):
    first, _kept = rollback_record.save(node["record"], node["link"], node["files"], now=0)
    switch(node)
    again, kept = rollback_record.save(node["record"], node["link"], node["files"], now=100)
    assert kept is True
    assert again == first


def test_restore_puts_back_content_mode_link_and_removes_what_did_not_exist(node):
    record, _kept = rollback_record.save(node["record"], node["link"], node["files"])
    assert rollback_record.restore_plan(record) == {"release": "", "files": [], "remove": []}
    switch(node)
    plan = rollback_record.restore_plan(record)
    assert plan == {"release": str(node["root"] / "releases" / "0.5.8"), "files": node["files"][:2],
                    "remove": node["files"][2:]}
    rollback_record.restore(node["record"], record, plan)
    root = node["root"]
    assert os.readlink(node["link"]) == str(root / "releases" / "0.5.8")
    assert (root / "sglang.service").read_text() == "ExecStart=old\n"
    assert (root / "sglang.env").read_text() == "SGLANG_API_KEY=old\n"
    assert os.stat(root / "sglang.env").st_mode & 0o777 == 0o600
    assert not (root / "tp-size").exists()
    assert rollback_record.restore_plan(record) == {"release": "", "files": [], "remove": []}
    assert not [name for name in os.listdir(root) if ".rollback-" in name]


def test_only_what_differs_is_put_back(node):
    record, _kept = rollback_record.save(node["record"], node["link"], node["files"])
    (node["root"] / "sglang.env").chmod(0o640)
    assert rollback_record.restore_plan(record) == {"release": "", "files": [node["files"][1]], "remove": []}


def test_a_copy_that_does_not_match_its_digest_is_refused_before_it_replaces_anything(node):
    record, _kept = rollback_record.save(node["record"], node["link"], node["files"])
    switch(node)
    with open(os.path.join(node["record"], record["files"][0]["copy"]), "w") as handle:
        handle.write("tampered\n")
    with pytest.raises(rollback_record.RecordError, match="does not match its digest"):
        rollback_record.restore(node["record"], record, rollback_record.restore_plan(record))
    assert (node["root"] / "sglang.service").read_text() == "ExecStart=new\n"


def test_discard_removes_the_record_and_a_half_built_one(node):
    rollback_record.save(node["record"], node["link"], node["files"])
    os.mkdir(node["record"] + ".new")
    assert rollback_record.discard(node["record"]) is True
    assert not os.path.exists(node["record"]) and not os.path.exists(node["record"] + ".new")
    assert rollback_record.discard(node["record"]) is False
    assert rollback_record.read(node["record"]) is None


def test_a_half_built_record_is_never_read_and_a_save_starts_it_over(node):
    os.makedirs(node["record"] + ".new/files")
    assert rollback_record.read(node["record"]) is None
    record, kept = rollback_record.save(node["record"], node["link"], node["files"])
    assert kept is False and rollback_record.read(node["record"]) == record


def test_a_record_this_collection_did_not_write_is_refused_by_name(node):
    os.makedirs(node["record"])
    with open(os.path.join(node["record"], "record.json"), "w") as handle:
        handle.write('{"format": 7}')
    with pytest.raises(rollback_record.RecordError, match="record.json is not one this collection wrote"):
        rollback_record.read(node["record"])
    # Without its record.json the directory is what a killed in-place removal left: a save does
    # not write over it (the module clears it with a warning first).
    os.unlink(os.path.join(node["record"], "record.json"))
    with pytest.raises(rollback_record.IncompleteRecord, match="without its record.json"):
        rollback_record.save(node["record"], node["link"], node["files"])


def siblings(node):
    """What lies beside the record: half-built and discarded ones a killed run left."""
    parent = os.path.dirname(node["record"])
    return sorted(name for name in os.listdir(parent) if name != "rollback") if os.path.isdir(parent) else []


def test_crash_during_save_leaves_a_half_built_record_that_is_never_read_and_is_deleted(node):
    os.makedirs(node["record"] + ".new/files")
    with open(node["record"] + ".new/record.json", "w") as handle:
        handle.write('{"format": 1, "fi')
    assert rollback_record.read(node["record"]) is None
    record, kept = rollback_record.save(node["record"], node["link"], node["files"])
    assert kept is False and rollback_record.read(node["record"]) == record and siblings(node) == []


def test_crash_after_save_before_the_switch_keeps_a_record_with_nothing_to_put_back(node):
    record, _kept = rollback_record.save(node["record"], node["link"], node["files"], now=0)
    again, kept = rollback_record.save(node["record"], node["link"], node["files"], now=100)
    assert (again, kept) == (record, True)
    assert rollback_record.restore_plan(record) == {"release": "", "files": [], "remove": []}


def test_crash_during_restore_leaves_the_record_and_the_next_restore_finishes(node):
    record, _kept = rollback_record.save(node["record"], node["link"], node["files"])
    switch(node)
    plan = rollback_record.restore_plan(record)
    # Killed after the first file went back: the rest still differs, the record is whole.
    rollback_record.restore(node["record"], record, dict(plan, files=plan["files"][:1], remove=[], release=""))
    assert rollback_record.read(node["record"]) == record
    assert rollback_record.restore_plan(record) == dict(plan, files=plan["files"][1:])
    rollback_record.restore(node["record"], record, rollback_record.restore_plan(record))
    assert rollback_record.restore_plan(record) == {"release": "", "files": [], "remove": []}


def test_crash_during_discard_leaves_no_part_of_the_record_at_its_path(node, monkeypatch):
    rollback_record.save(node["record"], node["link"], node["files"])

    def killed(path, *args, **kwargs):
        os.unlink(os.path.join(path, "record.json"))
        raise KeyboardInterrupt

    with monkeypatch.context() as patched:
        patched.setattr(rollback_record.shutil, "rmtree", killed)
        with pytest.raises(KeyboardInterrupt):
            rollback_record.discard(node["record"])
    assert not os.path.lexists(node["record"]) and rollback_record.read(node["record"]) is None
    leftover = siblings(node)
    assert len(leftover) == 1 and leftover[0].startswith("rollback.discarded-%d-" % os.getpid())
    record, kept = rollback_record.save(node["record"], node["link"], node["files"])
    assert kept is False and siblings(node) == []
    os.makedirs(node["record"] + ".discarded-1-2/files")
    assert rollback_record.discard(node["record"]) is True
    assert siblings(node) == [] and not os.path.lexists(node["record"])


def test_a_record_removed_in_place_half_way_is_incomplete_by_name(node):
    """What discard did before it renamed: a run killed inside its rmtree left the directory."""
    record, _kept = rollback_record.save(node["record"], node["link"], node["files"])
    os.unlink(os.path.join(node["record"], record["files"][0]["copy"]))
    with pytest.raises(rollback_record.IncompleteRecord) as missing_copy:
        rollback_record.read(node["record"])
    assert str(missing_copy.value) == (
        "%s is a rollback record without its copies files/0 (a run was killed while removing it)" % node["record"])
    os.unlink(os.path.join(node["record"], "record.json"))
    with pytest.raises(rollback_record.IncompleteRecord) as missing_manifest:
        rollback_record.read(node["record"])
    assert str(missing_manifest.value) == (
        "%s is a rollback record without its record.json (a run was killed while removing it)" % node["record"])
    assert rollback_record.discard(node["record"]) is True
    assert rollback_record.read(node["record"]) is None and siblings(node) == []


def test_a_restore_refuses_a_release_that_is_gone_and_changes_nothing(node):
    record, _kept = rollback_record.save(node["record"], node["link"], node["files"])
    switch(node)
    gone = node["root"] / "releases" / "0.5.8"
    (gone / "bin" / "python").unlink()
    (gone / "bin").rmdir()
    gone.rmdir()
    before = {name: (node["root"] / name).read_text() for name in ("sglang.service", "sglang.env", "tp-size")}
    with pytest.raises(rollback_record.RecordError) as refused:
        rollback_record.restore(node["record"], record, rollback_record.restore_plan(record))
    assert str(refused.value) == (
        "the release %s that the rollback record points back to is gone (no %s/bin/python): nothing was put back, "
        "the node is left as it is" % (gone, gone))
    assert {name: (node["root"] / name).read_text() for name in before} == before
    assert os.readlink(node["link"]) == str(node["root"] / "releases" / "0.5.23")


def test_a_secret_is_noted_not_copied_and_a_restore_keeps_the_current_one(node):
    secrets = node["files"][1:2]
    record, _kept = rollback_record.save(node["record"], node["link"], node["files"], secrets=secrets)
    assert record["files"][1] == {"path": secrets[0], "exists": True, "secret": True}
    assert sorted(os.listdir(os.path.join(node["record"], "files"))) == ["0"]
    switch(node)
    rollback_record.restore(node["record"], record, rollback_record.restore_plan(record))
    assert (node["root"] / "sglang.env").read_text() == "SGLANG_API_KEY=new\n"
    assert (node["root"] / "sglang.service").read_text() == "ExecStart=old\n"


def test_a_secret_that_did_not_exist_stays_and_an_old_records_copy_is_not_put_back(node):
    os.unlink(node["files"][1])
    record, _kept = rollback_record.save(node["record"], node["link"], node["files"], secrets=node["files"][1:2])
    switch(node)
    assert node["files"][1] not in rollback_record.restore_plan(record)["remove"]
    # A record written before secrets were marked holds a copy: keep_current leaves it there.
    (node["root"] / "sglang.env").write_text("SGLANG_API_KEY=old\n")
    rollback_record.discard(node["record"])
    old, _kept = rollback_record.save(node["record"], node["link"], node["files"])
    (node["root"] / "sglang.env").write_text("SGLANG_API_KEY=rotated\n")
    plan = rollback_record.restore_plan(old, keep_current=node["files"][1:2])
    assert node["files"][1] not in plan["files"] + plan["remove"]
    rollback_record.restore(node["record"], old, plan)
    assert (node["root"] / "sglang.env").read_text() == "SGLANG_API_KEY=rotated\n"


def test_a_relative_link_resolves_beside_the_link(tmp_path):
    (tmp_path / "releases" / "a").mkdir(parents=True)
    (tmp_path / "current").symlink_to("releases/a/")
    assert rollback_record.link_target(str(tmp_path / "current")) == str(tmp_path / "releases" / "a")
    assert rollback_record.link_target(str(tmp_path / "releases")) == ""


def rel(name: str, mtime: float, **extra) -> dict:
    return dict({"path": f"/opt/sglang/releases/{name}", "name": name, "mtime": mtime}, **extra)


def test_prune_keeps_the_installed_and_active_releases_then_the_newest():
    found = [rel("d", 4), rel("c", 3), rel("b", 2), rel("a", 1)]
    assert releases.to_prune(found, 2, "/opt/sglang/releases/a", "/opt/sglang/releases/b/") == [
        "/opt/sglang/releases/d", "/opt/sglang/releases/c"]
    assert releases.to_prune(found, 3, "/opt/sglang/releases/a", "") == ["/opt/sglang/releases/b"]
    assert releases.to_prune(found, 4, "/opt/sglang/releases/a", "") == []


def test_prune_never_removes_the_running_release_or_the_rollback_target():
    """A run that died after the switch left the link on c while the server runs a and the record
    names a; the next run installs d with keep 2: a stays, b goes (the link's c counts)."""
    found = [rel("d", 4), rel("c", 3), rel("b", 2), rel("a", 1, running=True, rollback_target=True)]
    assert releases.to_prune(found, 2, "/opt/sglang/releases/d", "/opt/sglang/releases/c") == [
        "/opt/sglang/releases/b"]
    found = [rel("c", 3, rollback_target=True), rel("b", 2, running=True), rel("a", 1)]
    assert releases.to_prune(found, 1, "/opt/sglang/releases/c", "/opt/sglang/releases/c") == [
        "/opt/sglang/releases/a"]
