"""Model directories laid out like a Hugging Face snapshot, with real safetensors shards.

The shards are written here in the safetensors format itself (an 8-byte little-endian header
length, a JSON header naming each tensor's dtype, shape and data_offsets, then the raw bytes),
small float32 tensors with known values, and an index whose weight_map names every tensor's
shard, as `save_pretrained` writes them. No hub is involved: the hub cannot be reached here.
"""
from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path

CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 8,
          "num_hidden_layers": 2, "torch_dtype": "float32"}


def write_shard(path: Path, tensors: dict[str, list[float]]) -> None:
    header, data = {}, b""
    for name, values in tensors.items():
        raw = struct.pack("<%df" % len(values), *values)
        header[name] = {"dtype": "F32", "shape": [len(values)], "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the format pads the header to 8 bytes with spaces
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)


def make_model(root: Path, shards: int = 3, per_shard: int = 2) -> list[str]:
    """A sharded model in ROOT; returns its expected files (config, index, shards)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.json").write_text(json.dumps(CONFIG))
    (root / "tokenizer.json").write_text('{"version": "1.0"}')
    weight_map, names = {}, []
    for s in range(1, shards + 1):
        name = f"model-{s:05d}-of-{shards:05d}.safetensors"
        tensors = {f"model.layers.{s}.w{t}.weight": [float(s * 10 + t + i) for i in range(16)]
                   for t in range(per_shard)}
        write_shard(root / name, tensors)
        weight_map.update({tensor: name for tensor in tensors})
        names.append(name)
    total = sum((root / n).stat().st_size for n in names)
    (root / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2))
    return ["config.json", "model.safetensors.index.json", *names]


def make_hub_cache(cache: Path, repo_id: str, commit: str, ref: str = "main") -> Path:
    """REPO_ID at COMMIT in a hub cache laid out as huggingface_hub keeps it: blobs, a snapshot
    of links into them, refs/REF naming the commit. Returns the snapshot directory."""
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    staging = repo / "staging"
    make_model(staging)
    (repo / "blobs").mkdir(parents=True)
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True)
    for path in sorted(staging.iterdir()):
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        path.rename(repo / "blobs" / digest)
        (snapshot / path.name).symlink_to(Path("..") / ".." / "blobs" / digest)
    staging.rmdir()
    (repo / "refs").mkdir()
    (repo / "refs" / ref).write_text(commit)
    return snapshot
