"""sglang_model's rows (plugins/plugin_utils/model_plan.py): the models staged, from the settings."""
from __future__ import annotations

import yaml

from ansible_collections.blackwell.sglang.plugins.plugin_utils.model_plan import rows
from conftest import ROOT

DEFAULTS = yaml.safe_load((ROOT / "roles" / "sglang_model" / "defaults" / "main.yml").read_text())
VARS = yaml.safe_load((ROOT / "roles" / "sglang_model" / "vars" / "main.yml").read_text())


def settings(**changes):
    values = {key: DEFAULTS.get("sglang_model_" + key) for key in VARS["__sglang_model_inputs"]}
    values.update(changes)
    return values


def test_the_settings_are_the_roles_own():
    assert set(settings()) == set(VARS["__sglang_model_inputs"])
    assert all("sglang_model_" + key in DEFAULTS for key in VARS["__sglang_model_inputs"])


def test_a_model_from_a_path_goes_under_the_models_directory_by_its_name():
    models = rows(settings(source_path="/mnt/shared/Kimi-K2.5/", models_dir="/opt/sglang/models"))
    assert [(m["label"], m["fact"], m["path_dest"]) for m in models] == [
        ("model", "sglang_model_staged_path", "/opt/sglang/models/Kimi-K2.5")]


def test_an_own_destination_wins_and_the_draft_model_follows_when_declared():
    models = rows(settings(source_path="/mnt/shared/Kimi-K2.5", dest="/data/kimi",
                           draft_source_path="/mnt/shared/Kimi-K2.5-eagle3", models_dir="/opt/sglang/models/"))
    assert [(m["label"], m["path_dest"], m["expected_files"]) for m in models] == [
        ("model", "/data/kimi", models[0]["expected_files"]),
        ("draft model", "/opt/sglang/models/Kimi-K2.5-eagle3", [])]
    assert models[1]["fact"] == "sglang_model_draft_staged_path"


def test_a_draft_from_the_hub_alone_is_declared_too():
    models = rows(settings(repo_id="moonshotai/Kimi-K2.5", draft_repo_id="lab/Kimi-K2.5-eagle3"))
    assert [(m["label"], m["repo_id"]) for m in models] == [
        ("model", "moonshotai/Kimi-K2.5"), ("draft model", "lab/Kimi-K2.5-eagle3")]
    assert len(rows(settings(repo_id="moonshotai/Kimi-K2.5"))) == 1
