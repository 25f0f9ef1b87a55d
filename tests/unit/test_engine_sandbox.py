"""What the engine's unit keeps read-only and where trust_remote_code's modules go, for the
ways a node names its Hugging Face caches and its models."""
from __future__ import annotations

from ansible_collections.blackwell.sglang.plugins.plugin_utils.sandbox import engine_sandbox, hf_home

HOME = "/var/lib/sglang"


def test_default_home_is_read_only_and_the_engine_offline():
    sandbox = engine_sandbox(HOME, {}, ["/models/kimi", "/models/kimi-eagle3"], False)
    assert sandbox == {
        "environment": {"HF_MODULES_CACHE": "/tmp/hf_modules", "HF_HUB_OFFLINE": "1"},
        "read_only": ["/var/lib/sglang/.cache/huggingface", "/models/kimi", "/models/kimi-eagle3"],
        "hf_home": "/var/lib/sglang/.cache/huggingface",
    }


def test_hf_home_follows_the_variables_the_libraries_read():
    assert hf_home(HOME + "/", {}) == "/var/lib/sglang/.cache/huggingface"
    assert hf_home(HOME, {"XDG_CACHE_HOME": "/srv/cache/"}) == "/srv/cache/huggingface"
    assert hf_home(HOME, {"XDG_CACHE_HOME": "/srv/cache", "HF_HOME": "/srv/hf/"}) == "/srv/hf"


def test_hub_caches_set_elsewhere_are_read_only_too():
    env = {"HF_HOME": "/srv/hf", "HF_HUB_CACHE": "/data/hub", "TRANSFORMERS_CACHE": "/data/tf/",
           "HUGGINGFACE_HUB_CACHE": "relative/ignored", "NCCL_DEBUG": "INFO"}
    assert engine_sandbox(HOME, env, [], False)["read_only"] == ["/srv/hf", "/data/hub", "/data/tf"]


def test_a_repository_id_is_not_a_path_and_duplicates_are_listed_once():
    sandbox = engine_sandbox(HOME, {"HF_HUB_CACHE": "/models"}, ["moonshotai/Kimi-K2.5", "/models/", ""], False)
    assert sandbox["read_only"] == ["/var/lib/sglang/.cache/huggingface", "/models"]


def test_an_engine_that_downloads_keeps_its_hub_cache_but_not_the_modules():
    sandbox = engine_sandbox(HOME, {}, ["moonshotai/Kimi-K2.5", "/models/draft"], True)
    assert sandbox == {"environment": {"HF_MODULES_CACHE": "/tmp/hf_modules"},
                       "read_only": ["/models/draft"], "hf_home": ""}
