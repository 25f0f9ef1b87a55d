"""Reads an installed SGLang without importing it; runs inside the lab containers.

Prints JSON: the release from METADATA; for each of the two patched files its sha256, the sha256
the wheel's RECORD lists, and its dict evaluated from the syntax tree; and every module of the
package whose bytecode for this interpreter is missing.
"""
import ast
import base64
import hashlib
import importlib.util
import json
import os
import sys

TARGETS = {
    "srt/distributed/device_communicators/all_reduce_utils.py": "TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES",
    "srt/distributed/device_communicators/torch_symm_mem.py": "TorchSymmMemCommunicator._WORLD_SIZES_MULTIMEM",
}


def _eval(node, env, path):
    return eval(compile(ast.Expression(node), path, "eval"), {"__builtins__": {}}, dict(env))


def evaluate(path, dotted):
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read(), path)
    # Module-level names the dict's expressions use (MiB = 1024 * 1024).
    env = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                env[node.targets[0].id] = _eval(node.value, env, path)
            except Exception:  # names bound to calls and imports are not needed here
                pass
    *classes, name = dotted.split(".")
    scope = tree.body
    for cls in classes:
        scope = next(n for n in scope if isinstance(n, ast.ClassDef) and n.name == cls).body
    for node in scope:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            value = _eval(node.value, env, path)
            return {str(k): v for k, v in value.items()}
    raise SystemExit(f"{dotted} not found in {path}")


def main(venv):
    site = next(
        os.path.join(venv, "lib", d, "site-packages")
        for d in sorted(os.listdir(os.path.join(venv, "lib"))) if d.startswith("python3")
    )
    dist_info = [d for d in os.listdir(site) if d.startswith("sglang-") and d.endswith(".dist-info")]
    assert len(dist_info) == 1, dist_info
    with open(os.path.join(site, dist_info[0], "METADATA"), encoding="utf-8") as handle:
        version = next(line.split(":", 1)[1].strip() for line in handle if line.startswith("Version:"))
    record = {}
    with open(os.path.join(site, dist_info[0], "RECORD"), encoding="utf-8") as handle:
        for line in handle:
            parts = line.rstrip("\n").rsplit(",", 2)
            if len(parts) == 3 and parts[1].startswith("sha256="):
                record[parts[0]] = parts[1][len("sha256="):]
    package = os.path.join(site, "sglang")
    files = {}
    for rel, name in TARGETS.items():
        path = os.path.join(package, rel)
        with open(path, "rb") as handle:
            digest = base64.urlsafe_b64encode(hashlib.sha256(handle.read()).digest()).rstrip(b"=").decode()
        files[rel] = {"sha256": digest, "record_sha256": record.get("sglang/" + rel), "dict": evaluate(path, name)}
    missing, modules = [], 0
    for root, _dirs, names in os.walk(package):
        for fname in names:
            if fname.endswith(".py"):
                modules += 1
                path = os.path.join(root, fname)
                if not os.path.exists(importlib.util.cache_from_source(path)):
                    missing.append(os.path.relpath(path, package))
    print(json.dumps({"version": version, "files": files, "modules": modules, "missing_bytecode": sorted(missing)}))


if __name__ == "__main__":
    main(sys.argv[1])
