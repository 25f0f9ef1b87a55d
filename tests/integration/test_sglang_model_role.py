"""The sglang_model role through ansible-playbook on localhost, in its mounted-path mode.

The hub cannot be reached from here and no stand-in hub is run, so the download path is not
exercised; these tests stage models from a directory laid out like a Hugging Face snapshot, with
real safetensors shards written by tests/model_snapshot.py: link and copy, a second run with 0
changed, check mode reporting drift (the missing files counted) and changing nothing, sources
that cannot be staged refused before anything changes, and bad settings refused.
"""
from __future__ import annotations

from pathlib import Path

import pytest

import model_snapshot
from conftest import local_play_tasks

pytestmark = pytest.mark.slow

ROLE = "blackwell.sglang.sglang_model : "
# A commit to download at: a revision that cannot move.
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def run_role(tmp_path: Path, *args: str, expect_rc: int = 0, **role_vars):
    play = [{
        "name": "Stage the model",
        "hosts": "localhost",
        "gather_facts": False,
        "vars": {"sglang_model_user": "nobody", "sglang_model_group": "nogroup", **role_vars},
        "roles": [{"role": "blackwell.sglang.sglang_model"}],
        "post_tasks": [
            {"name": "Show the staged path",
             "ansible.builtin.debug": {"msg": "{{ sglang_model_staged_path | default('unset') }}"}},
            {"name": "Show the staged draft model's path",
             "ansible.builtin.debug": {"msg": "{{ sglang_model_draft_staged_path | default('unset') }}"}},
        ],
    }]
    return local_play_tasks(tmp_path, play, *args, expect_rc=expect_rc)


def changed(tasks):
    return [name.removeprefix(ROLE) for name, result in tasks if result.get("changed")]


def failures(tasks):
    return [result["msg"] for _name, result in tasks if result.get("failed")]


def result(tasks, name):
    found = [res for task, res in tasks if task.removeprefix(ROLE) == name]
    assert len(found) == 1, [task for task, _res in tasks]
    return found[0]


def tree(root: Path) -> dict:
    """Every path under ROOT with its type, mode, owner and content or link target."""
    out = {}
    for path in sorted([root, *root.rglob("*")]):
        st = path.lstat()
        key = str(path.relative_to(root))
        if path.is_symlink():
            out[key] = ("link", str(path.readlink()))
        elif path.is_dir():
            out[key] = ("dir", oct(st.st_mode), st.st_uid)
        else:
            out[key] = ("file", oct(st.st_mode), st.st_uid, path.read_bytes())
    return out


@pytest.fixture()
def source(tmp_path):
    root = tmp_path / "shared" / "tiny-model"
    expected = model_snapshot.make_model(root, shards=3)
    return root, expected


def test_link_mode_links_checks_and_is_idempotent(tmp_path, source):
    src, _expected = source
    dest = tmp_path / "models" / "tiny-model"
    settings = {"sglang_model_source_path": str(src), "sglang_model_models_dir": str(tmp_path / "models")}

    check = run_role(tmp_path, "--check", **settings)
    assert result(check, "Report the staged model as missing or incomplete")["msg"] == (
        f"sglang_model: not staged: {dest} does not exist: 5 of 5 expected files missing"
    )
    assert "Link the model to its source" in changed(check)
    assert not (tmp_path / "models").exists()

    first = run_role(tmp_path, **settings)
    assert changed(first) == ["Create the models directory", "Link the model to its source"]
    assert dest.is_symlink() and dest.readlink() == src
    assert result(first, "Show the staged path")["msg"] == str(dest)

    again = run_role(tmp_path, **settings)
    assert changed(again) == []
    assert changed(run_role(tmp_path, "--check", **settings)) == []


def test_the_draft_model_is_staged_like_the_model_and_an_incomplete_one_stops_the_host(tmp_path, source):
    """EAGLE-3's draft model: drift in a check while it is missing, staged after the model and
    published on its own fact, and a draft source missing a shard fails the host before any change."""
    src, _expected = source
    draft = tmp_path / "shared" / "tiny-draft"
    model_snapshot.make_model(draft, shards=2)
    models = tmp_path / "models"
    settings = {"sglang_model_source_path": str(src), "sglang_model_draft_source_path": str(draft),
                "sglang_model_models_dir": str(models)}

    check = run_role(tmp_path, "--check", **settings)
    assert [res["msg"] for name, res in check if name.endswith("Report the staged model as missing or incomplete")] == [
        f"sglang_model: not staged: {models}/tiny-model does not exist: 5 of 5 expected files missing",
        f"sglang_model: not staged: {models}/tiny-draft does not exist: 4 of 4 expected files missing",
    ]
    assert not models.exists()

    first = run_role(tmp_path, **settings)
    assert changed(first) == ["Create the models directory", "Link the model to its source", "Link the model to its source"]
    assert (models / "tiny-draft").readlink() == draft
    assert result(first, "Show the staged path")["msg"] == str(models / "tiny-model")
    assert result(first, "Show the staged draft model's path")["msg"] == str(models / "tiny-draft")
    assert changed(run_role(tmp_path, **settings)) == []
    assert changed(run_role(tmp_path, "--check", **settings)) == []

    (draft / "model-00002-of-00002.safetensors").unlink()
    before = tree(models)
    broken = run_role(tmp_path, expect_rc=2, **settings)
    assert failures(broken) == [
        f"sglang_model: the draft model cannot be staged from {draft}: {draft}: 1 of 4 expected files missing"
        " (model-00002-of-00002.safetensors). Nothing was changed."]
    assert tree(models) == before


def test_copy_mode_copies_reports_a_missing_shard_and_restores_it(tmp_path, source):
    src, expected = source
    dest = tmp_path / "models" / "copy"
    settings = {"sglang_model_source_path": str(src) + "/", "sglang_model_source_mode": "copy",
                "sglang_model_dest": str(dest)}
    first = run_role(tmp_path, **settings)
    assert changed(first) == ["Create the models directory", "Copy the model from its source"]
    for name in expected + ["tokenizer.json"]:
        assert (dest / name).read_bytes() == (src / name).read_bytes()
        assert (dest / name).stat().st_uid == 65534  # nobody
    assert changed(run_role(tmp_path, **settings)) == []

    (dest / "model-00002-of-00003.safetensors").unlink()
    before = tree(tmp_path / "models")
    check = run_role(tmp_path, "--check", **settings)
    assert result(check, "Report the staged model as missing or incomplete")["msg"] == (
        f"sglang_model: not staged: {dest}: 1 of 5 expected files missing (model-00002-of-00003.safetensors)"
    )
    assert tree(tmp_path / "models") == before

    fixed = run_role(tmp_path, **settings)
    assert changed(fixed) == ["Copy the model from its source"]
    assert (dest / "model-00002-of-00003.safetensors").read_bytes() == (
        src / "model-00002-of-00003.safetensors").read_bytes()
    assert changed(run_role(tmp_path, **settings)) == []


def test_a_cut_copy_is_incomplete_and_copied_again(tmp_path, source):
    src, _expected = source
    dest = tmp_path / "models" / "copy"
    settings = {"sglang_model_source_path": str(src), "sglang_model_source_mode": "copy",
                "sglang_model_dest": str(dest)}
    run_role(tmp_path, **settings)
    shard = dest / "model-00001-of-00003.safetensors"
    whole = shard.read_bytes()
    shard.write_bytes(whole[:-4])
    check = run_role(tmp_path, "--check", **settings)
    assert result(check, "Report the staged model as missing or incomplete")["msg"] == (
        f"sglang_model: not staged: {dest}: 1 incomplete (model-00001-of-00003.safetensors: "
        f"{len(whole) - 4} bytes, the header says {len(whole)})"
    )
    assert changed(run_role(tmp_path, **settings)) == ["Copy the model from its source"]
    assert shard.read_bytes() == whole


@pytest.mark.parametrize("mode", ["link", "copy"])
@pytest.mark.parametrize("check", [False, True])
def test_a_source_that_cannot_be_staged_is_refused_with_nothing_changed(tmp_path, source, mode, check):
    src, _expected = source
    (src / "model-00003-of-00003.safetensors").unlink()
    settings = {"sglang_model_source_path": str(src), "sglang_model_source_mode": mode,
                "sglang_model_models_dir": str(tmp_path / "models")}
    tasks = run_role(tmp_path, *(["--check"] if check else []), expect_rc=2, **settings)
    assert failures(tasks) == [
        f"sglang_model: the model cannot be staged from {src}: {src}: 1 of 5 expected files missing "
        "(model-00003-of-00003.safetensors). Nothing was changed."
    ]
    assert changed(tasks) == []
    assert not (tmp_path / "models").exists()


@pytest.mark.parametrize(
    "settings, message",
    [
        ({}, 'sglang_model: set exactly one of sglang_model_repo_id and sglang_model_source_path '
             '(repo_id "", source_path ""). Nothing was changed.'),
        ({"sglang_model_repo_id": "org/m", "sglang_model_revision": COMMIT, "sglang_model_source_path": "/mnt/m"},
         'sglang_model: set exactly one of sglang_model_repo_id and sglang_model_source_path '
         '(repo_id "org/m", source_path "/mnt/m"). Nothing was changed.'),
        ({"sglang_model_source_path": "models/m"},
         'sglang_model: sglang_model_source_path must be an absolute path, not "models/m". Nothing was changed.'),
        ({"sglang_model_source_path": "/mnt/m", "sglang_model_draft_source_path": "drafts/d",
          "sglang_model_draft_dest": "d"},
         'sglang_model: sglang_model_draft_source_path must be an absolute path, not "drafts/d"; '
         'sglang_model_draft_dest must be an absolute path, not "d". Nothing was changed.'),
        ({"sglang_model_source_path": "/mnt/m", "sglang_model_draft_repo_id": "org/d", "sglang_model_draft_revision": COMMIT,
          "sglang_model_draft_source_path": "/mnt/d"},
         'sglang_model: set at most one of sglang_model_draft_repo_id and sglang_model_draft_source_path '
         '(repo_id "org/d", source_path "/mnt/d"). Nothing was changed.'),
    ],
)
def test_bad_settings_are_refused(tmp_path, settings, message):
    tasks = run_role(tmp_path, expect_rc=2, **settings)
    assert failures(tasks) == [message]


def test_a_revision_that_moves_is_refused_unless_the_site_allows_it(tmp_path):
    """A repository is downloaded at a commit: unset, a branch or a tag is refused naming the
    setting, before anything is staged; sglang_model_allow_moving_revision lets a branch pass."""
    cache = tmp_path / "hub"
    tasks = run_role(tmp_path, expect_rc=2, sglang_model_repo_id="org/tiny", sglang_model_draft_repo_id="org/d",
                     sglang_model_revision="main", sglang_model_hf_cache=str(cache))
    assert failures(tasks) == [
        "sglang_model: sglang_model_revision is 'main', which is not a commit: a branch or a tag moves, and the weights"
        " of org/tiny with it. Give the commit (the 40 hexadecimal characters of its revision on the hub), or set"
        " sglang_model_allow_moving_revision: true to follow a branch. sglang_model: sglang_model_draft_revision is"
        " not set: a branch or a tag moves, and the weights of org/d with it. Give the commit (the 40 hexadecimal"
        " characters of its revision on the hub), or set sglang_model_allow_moving_revision: true to follow a"
        " branch. Nothing was changed."]
    assert not cache.exists()
    # Allowed by name, the branch goes on to the staging (a check: nothing is downloaded).
    check = run_role(tmp_path, "--check", sglang_model_repo_id="org/tiny", sglang_model_revision="main",
                     sglang_model_allow_moving_revision=True, sglang_model_hf_cache=str(cache))
    assert failures(check) == []


def test_hub_mode_check_reports_a_model_missing_from_the_cache(tmp_path):
    cache = tmp_path / "hub"
    settings = {"sglang_model_repo_id": "org/tiny", "sglang_model_revision": "main",
                "sglang_model_allow_moving_revision": True, "sglang_model_hf_cache": str(cache)}
    check = run_role(tmp_path, "--check", **settings)
    assert result(check, "Report the model as missing or incomplete")["msg"] == (
        f"sglang_model: not staged: org/tiny at main is not in the cache {cache}"
    )
    assert not cache.exists()
    # A snapshot already complete in the cache needs no download (and no hub).
    snapshot = model_snapshot.make_hub_cache(cache, "org/tiny", "ab" * 20)
    again = run_role(tmp_path, **settings)
    assert changed(again) == []
    assert result(again, "Show the staged path")["msg"] == str(snapshot)
