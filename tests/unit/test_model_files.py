"""The model completeness core against model directories with real safetensors shards.

tests/model_snapshot.py writes the shards in the safetensors format and an index naming them,
as a Hugging Face snapshot holds them; each case then removes, cuts or corrupts real files.
"""
from __future__ import annotations

import json

import pytest

import model_snapshot
from ansible_collections.blackwell.sglang.plugins.module_utils import model_files

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def test_complete_model_has_every_shard_the_index_names(tmp_path):
    expected = model_snapshot.make_model(tmp_path / "m")
    state = model_files.inspect(str(tmp_path / "m"))
    assert state["complete"] is True and state["reason"] is None
    assert state["expected"] == expected
    assert state["missing"] == [] and state["damaged"] == []
    assert state["bytes"] == sum((tmp_path / "m" / name).stat().st_size for name in expected)


def test_written_shards_are_valid_safetensors(tmp_path):
    model_snapshot.make_model(tmp_path / "m", shards=1)
    shard = tmp_path / "m" / "model-00001-of-00001.safetensors"
    raw = shard.read_bytes()
    length = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + length])
    assert header["model.layers.1.w0.weight"] == {"dtype": "F32", "shape": [16], "data_offsets": [0, 64]}
    assert len(raw) == 8 + length + 128
    assert model_files.check_safetensors(str(shard)) is None


def test_missing_shards_are_counted_in_the_reason(tmp_path):
    model_snapshot.make_model(tmp_path / "m", shards=3)
    (tmp_path / "m" / "model-00002-of-00003.safetensors").unlink()
    (tmp_path / "m" / "model-00003-of-00003.safetensors").unlink()
    state = model_files.inspect(str(tmp_path / "m"))
    assert state["complete"] is False
    assert state["missing"] == ["model-00002-of-00003.safetensors", "model-00003-of-00003.safetensors"]
    assert state["reason"] == (
        f"{tmp_path}/m: 2 of 5 expected files missing "
        "(model-00002-of-00003.safetensors, model-00003-of-00003.safetensors)"
    )


def test_a_shard_cut_short_is_incomplete(tmp_path):
    model_snapshot.make_model(tmp_path / "m", shards=2)
    shard = tmp_path / "m" / "model-00001-of-00002.safetensors"
    raw = shard.read_bytes()
    shard.write_bytes(raw[:-10])
    state = model_files.inspect(str(tmp_path / "m"))
    assert state["complete"] is False and state["missing"] == []
    assert state["damaged"] == [{"file": "model-00001-of-00002.safetensors",
                                 "reason": f"{len(raw) - 10} bytes, the header says {len(raw)}"}]
    assert state["reason"] == (
        f"{tmp_path}/m: 1 incomplete (model-00001-of-00002.safetensors: "
        f"{len(raw) - 10} bytes, the header says {len(raw)})"
    )
    # Without the header check only presence counts.
    assert model_files.inspect(str(tmp_path / "m"), check_headers=False)["complete"] is True


@pytest.mark.parametrize(
    "content, reason",
    [
        (b"", "0 bytes, shorter than a safetensors header"),
        (b"\xff" * 8 + b"{}", "header length 18446744073709551615 does not fit in 10 bytes"),
        ((4).to_bytes(8, "little") + b"[1] ", "the safetensors header is not a JSON object"),
        ((12).to_bytes(8, "little") + b'{"t": {}}   ', "tensor t has no data_offsets"),
    ],
)
def test_files_that_are_not_safetensors_are_named(tmp_path, content, reason):
    path = tmp_path / "x.safetensors"
    path.write_bytes(content)
    assert model_files.check_safetensors(str(path)) == reason


def test_single_file_model_and_no_weights_at_all(tmp_path):
    root = tmp_path / "single"
    root.mkdir()
    (root / "config.json").write_text("{}")
    model_snapshot.write_shard(root / "model.safetensors", {"w": [1.0, 2.0]})
    assert model_files.inspect(str(root))["expected"] == ["config.json", "model.safetensors"]
    assert model_files.inspect(str(root))["complete"] is True
    (root / "model.safetensors").unlink()
    state = model_files.inspect(str(root))
    assert state["complete"] is False
    assert state["reason"] == f"{root}: neither model.safetensors.index.json nor model.safetensors is there"
    assert model_files.inspect(str(tmp_path / "nowhere"))["reason"] == f"{tmp_path}/nowhere does not exist"


def test_explicit_file_list_is_the_repository_list_at_a_revision(tmp_path):
    model_snapshot.make_model(tmp_path / "m", shards=1)
    listed = ["config.json", "tokenizer.json", "tokenizer_config.json", "model-00001-of-00001.safetensors"]
    state = model_files.inspect(str(tmp_path / "m"), listed)
    assert state["missing"] == ["tokenizer_config.json"]
    assert state["reason"] == f"{tmp_path}/m: 1 of 4 expected files missing (tokenizer_config.json)"


def test_hub_cache_snapshot_is_found_by_branch_and_by_commit(tmp_path):
    cache = tmp_path / "hub"
    snapshot = model_snapshot.make_hub_cache(cache, "org/tiny", COMMIT)
    assert model_files.hub_snapshot(str(cache), "org/tiny", "main") == (str(snapshot), None)
    assert model_files.hub_snapshot(str(cache), "org/tiny", COMMIT) == (str(snapshot), None)
    assert model_files.inspect(str(snapshot))["complete"] is True
    assert model_files.hub_snapshot(str(cache), "org/tiny", "v2") == (
        None, f"org/tiny at v2 is not in the cache {cache}")
    other = "f" * 40
    assert model_files.hub_snapshot(str(cache), "org/tiny", other) == (
        None, f"org/tiny at {other} ({other}) is not in the cache {cache}")


def test_a_destination_that_does_not_exist_misses_every_file_of_its_source(tmp_path):
    listed = model_snapshot.make_model(tmp_path / "source", shards=2)
    state = model_files.inspect(str(tmp_path / "dest"), listed)
    assert state["missing"] == sorted(listed)
    assert state["reason"] == f"{tmp_path}/dest does not exist: 4 of 4 expected files missing"


@pytest.mark.parametrize(
    "line, token",
    [
        ('HF_TOKEN="hf_plain"', "hf_plain"),
        # sglang.env.j2 escapes backslash, double quote, dollar and backquote inside "...".
        ('HF_TOKEN="hf_a\\\\b\\"c\\$d\\`e"', 'hf_a\\b"c$d`e'),
    ],
)
def test_the_download_reads_the_token_as_the_secrets_file_quotes_it(tmp_path, line, token):
    env_file = tmp_path / "sglang.env"
    env_file.write_text(f"# Ansible managed\n{line}\nSGLANG_API_KEY=\"k\"\n")
    from ansible_collections.blackwell.sglang.plugins.modules import sglang_model_download as hf_download
    assert hf_download.token_from_env_file(str(env_file)) == token
    assert hf_download.token_from_env_file(str(tmp_path / "missing")) is None
    env_file.write_text('SGLANG_API_KEY="k"\n')
    assert hf_download.token_from_env_file(str(env_file)) is None
