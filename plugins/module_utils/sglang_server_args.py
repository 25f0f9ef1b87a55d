# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Static reading of an installed SGLang release: its command-line flags and known hazards.

Nothing here imports SGLang: a node's venv may hold a release whose import pulls in torch and
CUDA, and the service role must decide on flags before anything is started. The release's own
source is parsed with ``ast`` instead.

Two ways SGLang declares flags, both read here:

* ``parser.add_argument("--flag", "--alias", ...)`` calls (every release);
* annotated dataclass fields ``name: A[T, "help"]`` or ``A[T, Arg(...)]`` turned into flags
  by ``add_cli_args_from_dataclass`` (0.5.15 and later): on ``ServerArgs`` itself, and from
  0.5.23 on in the namespaces under ``srt/arg_groups/fields/``.

Pure Python, standard library only, Python 3.8+.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ast
import glob
import os
import re

SERVER_ARGS = os.path.join("srt", "server_args.py")
FIELDS_DIR = os.path.join("srt", "arg_groups", "fields")
VERSION_FILE = "version.py"
FUSION_SOURCE = os.path.join("srt", "layers", "flashinfer_comm_fusion.py")
ENVIRON_SOURCE = os.path.join("srt", "environ.py")
COMMUNICATORS_DIR = os.path.join("srt", "distributed", "device_communicators")
HTTP_SERVER = os.path.join("srt", "entrypoints", "http_server.py")
READY_PATH = "/ready"

# The message SGLang raises when FlashInfer all-reduce fusion meets a GPU outside SM90/SM10X
# (0.5.15 and later): on an SM120 node such a release dies at start-up, then systemd restarts it.
FUSION_SM_RESTRICTION = "FlashInfer allreduce fusion requires SM90 or SM10X"
PCIE_IPC_ENV = "SGLANG_ENABLE_PCIE_IPC_ALLREDUCE"
PCIE_IPC_MAX_NUMEL_ENV = "SGLANG_PCIE_IPC_MAX_NUMEL"

FUSION_LEGACY_FLAG = "--enable-flashinfer-allreduce-fusion"
FUSION_BACKEND_FLAG = "--flashinfer-allreduce-fusion-backend"

_DEPRECATED_HELP = re.compile(r"^\W*(note:\s*)?deprecated\b|\bis deprecated\b", re.IGNORECASE)
_REPLACEMENT_HELP = re.compile(r"\buse\s+(--[A-Za-z0-9][A-Za-z0-9-]*(?:=[^\s)]+| <[^>\s]+>)?)", re.IGNORECASE)


class ReleaseScanError(Exception):
    """The directory does not hold an SGLang release this module can read."""


def _text(node):
    """Literal text of a string expression: constants, f-strings (literal parts) and ``+``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(_text(part) or "" for part in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _text(node.left), _text(node.right)
        if left is None and right is None:
            return None
        return (left or "") + (right or "")
    return None


def _name(node):
    """Last dotted component of a Name or Attribute node (``argparse.X`` -> ``X``)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _keyword(call, name):
    for keyword in call.keywords:
        if keyword.arg == name:
            return keyword.value
    return None


def _describe(flag, help_text, deprecated_by_action, new_flag):
    help_text = help_text or ""
    deprecated = deprecated_by_action or bool(_DEPRECATED_HELP.search(help_text))
    replacement = new_flag
    if deprecated and replacement is None:
        match = _REPLACEMENT_HELP.search(help_text)
        if match:
            replacement = match.group(1).rstrip(".,;")
    return {
        "flag": flag,
        "deprecated": deprecated,
        "replacement": replacement if deprecated else None,
    }


def _merge(flags, entry):
    known = flags.get(entry["flag"])
    # A flag registered twice (a field and a manual deprecated spelling) is deprecated if
    # either registration says so.
    if known is None or (entry["deprecated"] and not known["deprecated"]):
        flags[entry["flag"]] = entry


def flags_from_add_argument(tree):
    """Flags of every ``*.add_argument("--x", ...)`` call in a parsed module."""
    flags = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and _name(node.func) == "add_argument"):
            continue
        names = [_text(arg) for arg in node.args]
        names = [name for name in names if name and name.startswith("--")]
        if not names:
            continue
        action = _keyword(node, "action")
        action_name = _name(action) if action is not None else None
        by_action = bool(action_name and "deprecated" in action_name.lower())
        help_node = _keyword(node, "help")
        new_flag_node = _keyword(node, "new_flag")
        for name in names:
            _merge(flags, _describe(
                name,
                _text(help_node) if help_node is not None else None,
                by_action,
                _text(new_flag_node) if new_flag_node is not None else None,
            ))
        if action_name == "BooleanOptionalAction":
            for name in names:
                _merge(flags, _describe("--no-" + name[2:], None, False, None))
    return flags


def _annotated_parts(annotation):
    """Elements of ``A[...]`` / ``Annotated[...]`` or None for any other annotation."""
    if not isinstance(annotation, ast.Subscript) or _name(annotation.value) not in ("A", "Annotated"):
        return None
    inner = annotation.slice
    index = getattr(ast, "Index", None)
    if index is not None and isinstance(inner, index):  # Python 3.8
        inner = inner.value
    if not isinstance(inner, ast.Tuple) or len(inner.elts) < 2:
        return None
    return inner.elts


def _field_flags(field_name, meta):
    """Flags one annotated field contributes, following add_cli_args_from_dataclass's rules."""
    help_text = _text(meta)
    if help_text is not None:
        return [_describe("--" + field_name.replace("_", "-"), help_text, False, None)]
    if not (isinstance(meta, ast.Call) and _name(meta.func) == "Arg"):
        # Fields without Arg or a help string get no automatic flag.
        return []
    no_cli = _keyword(meta, "no_cli")
    if isinstance(no_cli, ast.Constant) and no_cli.value is True:
        return []
    cli_name = _keyword(meta, "cli_name")
    primary = _text(cli_name) if cli_name is not None else None
    names = [primary or "--" + field_name.replace("_", "-")]
    aliases = _keyword(meta, "aliases")
    if isinstance(aliases, (ast.List, ast.Tuple)):
        names.extend(text for text in (_text(elt) for elt in aliases.elts) if text)
    help_node = _keyword(meta, "help")
    help_text = _text(help_node) if help_node is not None else None
    action = _keyword(meta, "action")
    action_name = _name(action) if action is not None else None
    by_action = bool(action_name and "deprecated" in action_name.lower())
    entries = [_describe(name, help_text, by_action, None) for name in names]
    if action_name == "BooleanOptionalAction":
        entries.extend(_describe("--no-" + name[2:], None, False, None) for name in names)
    return entries


def flags_from_fields(tree, class_names=None):
    """Flags of the annotated dataclass fields of the classes in a parsed module."""
    flags = {}
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        if class_names is not None and node.name not in class_names:
            continue
        for statement in node.body:
            if not (isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name)):
                continue
            parts = _annotated_parts(statement.annotation)
            if parts is None:
                continue
            for entry in _field_flags(statement.target.id, parts[1]):
                _merge(flags, entry)
    return flags


def _parse(path):
    try:
        with open(path, "rb") as handle:
            return ast.parse(handle.read(), filename=path)
    except (OSError, IOError) as exc:
        raise ReleaseScanError("cannot read %s: %s" % (path, exc))
    except SyntaxError as exc:
        raise ReleaseScanError("cannot parse %s: %s" % (path, exc))


def _read_text(path):
    try:
        with open(path, "rb") as handle:
            return handle.read().decode("utf-8", "replace")
    except (OSError, IOError):
        return ""


def _version_from_metadata(package_dir):
    parent = os.path.dirname(os.path.abspath(package_dir))
    for metadata in sorted(glob.glob(os.path.join(parent, "sglang-*.dist-info", "METADATA"))):
        for line in _read_text(metadata).splitlines():
            if line.startswith("Version:"):
                return line.split(":", 1)[1].strip()
            if not line.strip():
                break
    return None


def _version_from_module(path):
    if not os.path.isfile(path):
        return None
    for node in _parse(path).body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign):
            targets = [node.target]
            node = ast.Assign(targets=targets, value=node.value)
        for target in targets:
            if isinstance(target, ast.Name) and target.id in ("__version__", "version"):
                value = _text(node.value) if node.value is not None else None
                if value:
                    return value
    return None


def read_version(package_dir):
    """Release number: the installed distribution's metadata, else the generated _version.py."""
    version = _version_from_metadata(package_dir)
    version = version or _version_from_module(os.path.join(package_dir, "_version.py"))
    version = version or _version_from_module(os.path.join(package_dir, VERSION_FILE))
    if not version:
        raise ReleaseScanError("cannot tell the SGLang release installed at %s" % package_dir)
    return version


def read_flags(package_dir):
    """Every command-line flag of ``sglang.launch_server`` in this release, with deprecations."""
    server_args = os.path.join(package_dir, SERVER_ARGS)
    tree = _parse(server_args)
    flags = flags_from_add_argument(tree)
    for entry in flags_from_fields(tree, class_names=("ServerArgs",)).values():
        _merge(flags, entry)
    for path in sorted(glob.glob(os.path.join(package_dir, FIELDS_DIR, "*.py"))):
        for entry in flags_from_fields(_parse(path)).values():
            _merge(flags, entry)
    if not flags:
        raise ReleaseScanError("no command-line flags found in %s" % server_args)
    return flags


def _raises_with(tree, message):
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and node.exc is not None:
            for inner in ast.walk(node.exc):
                text = _text(inner)
                if text and message in text:
                    return True
    return False


def fusion_is_sm_restricted(package_dir):
    """True when the release's FlashInfer fusion raises on GPUs other than SM90/SM10X."""
    path = os.path.join(package_dir, FUSION_SOURCE)
    if FUSION_SM_RESTRICTION not in _read_text(path):
        return False
    return _raises_with(_parse(path), FUSION_SM_RESTRICTION)


def has_pcie_ipc_allreduce(package_dir):
    """True when the release reads SGLANG_ENABLE_PCIE_IPC_ALLREDUCE (0.5.23 and later)."""
    if PCIE_IPC_ENV in _read_text(os.path.join(package_dir, ENVIRON_SOURCE)):
        return True
    for path in glob.glob(os.path.join(package_dir, COMMUNICATORS_DIR, "*.py")):
        if PCIE_IPC_ENV in _read_text(path):
            return True
    return False


def serves_ready(package_dir):
    """True when the release's HTTP server has a ``GET /ready`` route (0.5.23 has it, 0.5.18 not):
    200 once it takes new requests, 503 before that and while it stops. Read from the route's
    decorator (``@app.get("/ready")``) in the source, not from a version number."""
    path = os.path.join(package_dir, HTTP_SERVER)
    if READY_PATH not in _read_text(path):
        return False
    for node in ast.walk(_parse(path)):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for decorator in node.decorator_list:
            if (isinstance(decorator, ast.Call) and isinstance(decorator.func, ast.Attribute)
                    and decorator.func.attr in ("get", "api_route") and decorator.args
                    and _text(decorator.args[0]) == READY_PATH):
                return True
    return False


def fusion_arguments(flags):
    """Arguments that turn FlashInfer all-reduce fusion on, spelled for this release.

    0.5.23 deprecates the boolean flag in favour of a backend choice; ``auto`` keeps the
    release's own backend selection. Empty when the release knows neither spelling.
    """
    legacy = flags.get(FUSION_LEGACY_FLAG)
    if FUSION_BACKEND_FLAG in flags and (legacy is None or legacy["deprecated"]):
        return [FUSION_BACKEND_FLAG, "auto"]
    if legacy is not None:
        return [FUSION_LEGACY_FLAG]
    return []


def find_package_dir(venv=None, path=None):
    """Directory of the ``sglang`` package: given directly, or looked up in a venv."""
    if path:
        candidate = path
    else:
        matches = sorted(glob.glob(os.path.join(venv, "lib", "python3*", "site-packages", "sglang")))
        if not matches:
            raise ReleaseScanError("no sglang package under %s/lib/python3*/site-packages" % venv)
        candidate = matches[-1]
    if not os.path.isfile(os.path.join(candidate, SERVER_ARGS)):
        raise ReleaseScanError("%s is not an SGLang package: %s is missing" % (candidate, SERVER_ARGS))
    return candidate


def scan_release(package_dir):
    """Everything the service role needs to know about one installed release."""
    flags = read_flags(package_dir)
    return {
        "package_dir": package_dir,
        "version": read_version(package_dir),
        "flags": sorted(flags),
        "deprecated": dict(
            (flag, flags[flag]["replacement"]) for flag in sorted(flags) if flags[flag]["deprecated"]
        ),
        "fusion_arguments": fusion_arguments(flags),
        "fusion_sm_restricted": fusion_is_sm_restricted(package_dir),
        "pcie_ipc_allreduce": has_pcie_ipc_allreduce(package_dir),
        "ready_endpoint": serves_ready(package_dir),
    }


def flags_in(arguments):
    """Flags named in an argument list (``--x``, ``--x=value``), in order, without duplicates."""
    seen = []
    for argument in arguments:
        if argument.startswith("--") and len(argument) > 2:
            flag = argument.split("=", 1)[0]
            if flag not in seen:
                seen.append(flag)
    return seen
