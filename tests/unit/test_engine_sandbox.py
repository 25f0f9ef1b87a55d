"""What the engine's unit keeps read-only, pins and sets, for the ways a node names its Hugging
Face caches, its models and its writable paths."""
from __future__ import annotations

from ansible_collections.blackwell.sglang.plugins.plugin_utils import settings
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sandbox import engine_sandbox, hf_home

HOME = "/var/lib/sglang"


def test_default_home_is_read_only_pinned_and_the_engine_offline():
    sandbox = engine_sandbox(HOME, {}, "/models/kimi", "/var/lib/sglang/models/kimi-eagle3", True, False, [HOME])
    assert sandbox == {
        "environment": {"HF_MODULES_CACHE": "/tmp/hf_modules", "HF_HUB_OFFLINE": "1"},
        "read_only": ["/var/lib/sglang/.cache/huggingface", "/models/kimi", "/var/lib/sglang/models/kimi-eagle3"],
        # Between the writable home and what is read-only inside it: mount points, which the
        # engine can neither rename nor remove.
        "pinned": ["/var/lib/sglang/.cache", "/var/lib/sglang/models"],
        "hf_home": "/var/lib/sglang/.cache/huggingface",
        "problems": [],
    }


def test_hf_home_follows_the_variables_the_libraries_read():
    assert hf_home(HOME + "/", {}) == "/var/lib/sglang/.cache/huggingface"
    assert hf_home(HOME, {"XDG_CACHE_HOME": "/srv/cache/"}) == "/srv/cache/huggingface"
    assert hf_home(HOME, {"XDG_CACHE_HOME": "/srv/cache", "HF_HOME": "/srv/hf/"}) == "/srv/hf"


def test_hub_caches_set_elsewhere_are_read_only_too_and_nested_ones_listed_once():
    env = {"HF_HOME": "/srv/hf", "HF_HUB_CACHE": "/data/hub", "TRANSFORMERS_CACHE": "/srv/hf/tf/",
           "NCCL_DEBUG": "INFO"}
    sandbox = engine_sandbox(HOME, env, "", "", False, False, [HOME])
    assert sandbox["read_only"] == ["/srv/hf", "/data/hub"]
    assert sandbox["pinned"] == []


def test_a_hub_snapshot_guards_the_blobs_its_links_point_to():
    snapshot = "/data/hub/models--moonshotai--Kimi-K2.5/snapshots/0123abcd/"
    sandbox = engine_sandbox(HOME, {}, snapshot, "", False, True, [HOME, "/data"])
    assert sandbox["read_only"] == ["/data/hub/models--moonshotai--Kimi-K2.5"]
    assert sandbox["pinned"] == ["/data/hub"]


def test_the_draft_model_counts_only_with_eagle3_on():
    sandbox = engine_sandbox(HOME, {}, "/models/kimi", "/var/lib/sglang/models/kimi-eagle3", False, False, [HOME])
    assert sandbox["read_only"] == ["/var/lib/sglang/.cache/huggingface", "/models/kimi"]
    assert sandbox["pinned"] == ["/var/lib/sglang/.cache"]


def test_a_repository_id_is_not_a_path():
    sandbox = engine_sandbox(HOME, {}, "moonshotai/Kimi-K2.5", "", True, False, [HOME])
    assert sandbox["read_only"] == ["/var/lib/sglang/.cache/huggingface"]


def test_an_engine_that_downloads_keeps_its_hub_cache_but_not_the_modules():
    sandbox = engine_sandbox(HOME, {}, "moonshotai/Kimi-K2.5", "/models/draft", True, True, [HOME])
    assert sandbox == {"environment": {"HF_MODULES_CACHE": "/tmp/hf_modules"},
                       "read_only": ["/models/draft"], "pinned": [], "hf_home": "", "problems": []}


def test_a_writable_path_at_or_inside_a_read_only_one_is_a_problem():
    sandbox = engine_sandbox(HOME, {}, "/var/lib/sglang/models/kimi", "", False, False,
                             [HOME, "/var/lib/sglang/.cache/huggingface", "/var/lib/sglang/models/kimi/cache"])
    assert sandbox["problems"] == [
        "sglang_service_writable_paths: /var/lib/sglang/.cache/huggingface lies inside "
        "/var/lib/sglang/.cache/huggingface, which the engine may only read (the Hugging Face home or a "
        "model); a writable path there would let it change that code.",
        "sglang_service_writable_paths: /var/lib/sglang/models/kimi/cache lies inside "
        "/var/lib/sglang/models/kimi, which the engine may only read (the Hugging Face home or a model); "
        "a writable path there would let it change that code.",
    ]


def test_the_settings_refuse_what_would_leave_code_unguarded():
    assert settings.problems({
        "sglang_service_environment": {"HF_HOME": "~/.cache/huggingface", "XDG_CACHE_HOME": "cache",
                                       "NCCL_DEBUG": "relative/is/fine/here"},
    }) == [
        "sglang_service_environment: HF_HOME must be an absolute path, got '~/.cache/huggingface': the "
        "engine's sandbox cannot keep a relative or ~ path read-only.",
        "sglang_service_environment: XDG_CACHE_HOME must be an absolute path, got 'cache': the engine's "
        "sandbox cannot keep a relative or ~ path read-only.",
    ]
    # The home comes from sglang_install_user_home where the service's own is not set, as the
    # role's default does; a draft model counts only with EAGLE-3 on.
    assert settings.problems({
        "sglang_install_user_home": "/home/sglang",
        "sglang_service_writable_paths": ["/home/sglang", "/home/sglang/.cache/huggingface/hub", "/srv/draft/x"],
        "sglang_service_eagle3_draft_model_path": "/srv/draft",
        "sglang_service_eagle3_enabled": False,
    }) == [
        "sglang_service_writable_paths: /home/sglang/.cache/huggingface/hub lies inside "
        "/home/sglang/.cache/huggingface, which the engine may only read (the Hugging Face home or a model); "
        "a writable path there would let it change that code."]
    assert len(settings.problems({
        "sglang_service_writable_paths": ["/srv/draft/x"], "sglang_service_eagle3_draft_model_path": "/srv/draft",
        "sglang_service_eagle3_enabled": True})) == 1
    # An engine that downloads may write its hub cache.
    assert settings.problems({
        "sglang_service_writable_paths": ["/var/lib/sglang/.cache/huggingface"],
        "sglang_service_engine_downloads": True}) == []
