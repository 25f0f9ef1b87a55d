# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Settings that would break the file they land in, found before any node changes.

Every setting the roles write into a line-oriented file (the secrets file, the systemd unit and
the launcher's arguments in it, apt sources, pip's requirement, constraint and source files,
profile.d and ld.so.conf.d) has one row in ``TABLE``: its name and the format of the place it
lands in. ``problems`` judges a mapping of setting names to values against that table and
returns one message per wrong setting, naming the setting and what is wrong, never a secret's
value. ``secret`` is the documented rule for a secret's trailing line break.

Plain Python without Ansible imports: the lookup ``blackwell.sglang.setting_problems`` (the
preflight play and each role's refusal) and the filter ``blackwell.sglang.secret_line`` call it,
and the unit tests call it directly. A setting added to a template is one row here.
"""
from __future__ import annotations

import re

from ansible_collections.blackwell.sglang.plugins.plugin_utils import sandbox

# What every line-oriented file forbids inside one value: a line break ends the line (the rest
# becomes a line of its own: a new variable, a new unit key, a new requirement) and NUL ends
# the string for whoever reads the file.
LINE_BREAKS = {"\n": "a line break (\\n)", "\r": "a carriage return (\\r)", "\x00": "a NUL byte"}

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# What would break User=/Group= in the unit or the account modules: whitespace, a control
# character, ':' and '/' (passwd's separators and paths), '%' (a unit specifier), a leading '-'
# (an option) or digits alone (a numeric id). Directory-service names with dots or '@' pass.
ACCOUNT_FORBIDDEN = re.compile(r"[\s:/%\x00-\x1f\x7f]")
# A path that lands unquoted in a shell script (profile.d) or a file read word by word.
PLAIN_PATH = re.compile(r"/[A-Za-z0-9_./+@:-]*\Z")

# Launch arguments the collection spells itself: given again in sglang_service_extra_args,
# SGLang's parser keeps the last one, which would bypass the open-API guard (--host), leak the
# key into the unit (--api-key) or start an engine the role did not judge. Each names the
# setting to use instead.
OWNED_FLAGS = {
    "--host": "sglang_service_host",
    "--port": "sglang_service_port",
    "--api-key": "sglang_service_api_key",
    "--model-path": "sglang_service_model_path",
    "--model": "sglang_service_model_path",
    "--served-model-name": "sglang_service_served_model_name",
    "--tp-size": "sglang_service_tp_size",
    "--tensor-parallel-size": "sglang_service_tp_size",
    "--enable-torch-symm-mem": "sglang_service_torch_symm_mem_enabled",
    "--enable-flashinfer-allreduce-fusion": "sglang_service_flashinfer_fusion_enabled",
    "--flashinfer-allreduce-fusion-backend": "sglang_service_flashinfer_fusion_enabled",
    "--enable-metrics": "sglang_service_metrics_enabled",
}
# Spelt by the role only with EAGLE-3 on (sglang_service_eagle3_enabled); with it off, other
# speculative decoding (NEXTN, EAGLE) is the operator's to give in the extra arguments.
EAGLE3_FLAGS = {
    "--speculative-algorithm": "sglang_service_eagle3_enabled",
    "--speculative-draft-model-path": "sglang_service_eagle3_draft_model_path",
    "--speculative-num-steps": "sglang_service_eagle3_num_steps",
    "--speculative-eagle-topk": "sglang_service_eagle3_topk",
    "--speculative-num-draft-tokens": "sglang_service_eagle3_num_draft_tokens",
}

# Formats: what each kind of place forbids beyond line breaks and NUL.
#   secret       a value of the root-only secrets file (double-quoted); one trailing line break
#                is removed first (see secret())
#   line         one value on one line of a unit, a requirement or a sources file (quoted where
#                the format quotes)
#   lines        a list of such values, one line or argv word each
#   env          a mapping of environment variable names to values (unit Environment= lines)
#   engine_env   env, whose Hugging Face paths (sandbox.PATH_VARIABLES) are absolute
#   nccl_env     env of NCCL_ variables only (sglang_service_nccl_environment: the engine's and
#                the smoke test's)
#   path         an absolute path, written unquoted into a unit or a sources file
#   shell_path   an absolute path written unquoted into a shell script (profile.d)
#   url          a URL in a whitespace-separated field (deb822 URIs, pip's index lists)
#   urls         a list of such URLs
#   base_url     empty, or http(s)://host[:port] with no path: an address others append a path
#                to (SGLang's router: /workers)
#   requirement  a list of requirement or constraint lines: none may be a pip option
#   account      a user or group name
#   launch_args  sglang_service_extra_args: argv words; none of the flags the role spells
#   writable_paths  sglang_service_writable_paths: lines, none at or inside a path the engine
#                may only read (blackwell.sglang.engine_sandbox)
#   int:MIN      a whole number not below MIN; int:MIN:MAX within both bounds
#   context      not judged itself: read by another row's judgement
TABLE = {
    # sglang_service: the secrets file, the unit, the launcher's arguments.
    "sglang_service_api_key": "secret",
    "sglang_service_hf_token": "secret",
    "sglang_service_model_path": "line",
    "sglang_service_served_model_name": "line",
    "sglang_service_eagle3_draft_model_path": "line",
    "sglang_service_extra_args": "launch_args",
    "sglang_service_eagle3_enabled": "context",
    "sglang_service_environment": "engine_env",
    "sglang_service_nccl_smoke_environment": "env",
    "sglang_service_nccl_environment": "nccl_env",
    "sglang_service_host": "line",
    "sglang_service_venv": "path",
    "sglang_service_release_path": "line",
    "sglang_service_cuda_home": "path",
    "sglang_service_env_file": "path",
    "sglang_service_writable_paths": "writable_paths",
    "sglang_service_user_home": "path",
    "sglang_service_engine_downloads": "context",
    "sglang_service_user": "account",
    "sglang_service_group": "account",
    "sglang_service_limit_stack": "line",
    "sglang_service_port": "int:1:65535",
    "sglang_service_router_url": "base_url",
    "sglang_service_health_delay": "int:1",
    "sglang_service_health_timeout": "int:1",
    "sglang_service_nccl_smoke_timeout": "int:1",
    "sglang_service_restart_sec": "int:0",
    "sglang_service_start_limit_interval_sec": "int:0",
    "sglang_service_start_limit_burst": "int:1",
    "sglang_service_timeout_stop_sec": "int:1",
    "sglang_service_limit_nofile": "int:1",
    "sglang_service_eagle3_num_steps": "int:1",
    "sglang_service_eagle3_topk": "int:1",
    "sglang_service_eagle3_num_draft_tokens": "int:1",
    # sglang_install: requirement, constraint and pip/uv source files, the account.
    "sglang_install_version": "line",
    "sglang_install_extras": "lines",
    "sglang_install_extra_packages": "requirement",
    "sglang_install_constraints": "requirement",
    "sglang_install_index_url": "url",
    "sglang_install_extra_index_urls": "urls",
    "sglang_install_find_links": "urls",
    "sglang_install_user": "account",
    "sglang_install_group": "account",
    "sglang_install_user_home": "path",
    "sglang_install_releases_dir": "path",
    "sglang_install_venv": "path",
    # cuda13: the deb822 sources file, profile.d, ld.so.conf.d.
    "cuda13_repo_base_url": "url",
    "cuda13_repo_distro": "line",
    "cuda13_repo_keyring_path": "path",
    "cuda13_home": "shell_path",
    "cuda13_toolkit_package": "line",
    "cuda13_toolkit_version": "line",
    "cuda13_toolkit_dir": "path",
    # playbooks/node.yml: the node's converge lock.
    "sglang_rollout_lock_path": "path",
    "sglang_rollout_lock_timeout": "int:0",
    "sglang_rollout_lock_break": "line",
    # sglang_model: the model's names and the hub mirror.
    "sglang_model_repo_id": "line",
    "sglang_model_revision": "line",
    "sglang_model_source_path": "line",
    "sglang_model_dest": "line",
    "sglang_model_draft_repo_id": "line",
    "sglang_model_draft_revision": "line",
    "sglang_model_draft_source_path": "line",
    "sglang_model_draft_dest": "line",
    "sglang_model_hf_endpoint": "url",
    "sglang_model_hf_token": "secret",
}


def secret(value):
    """The rule for every secret: one trailing line break (a YAML block scalar keeps one, a
    file read with a newline at its end has one) is not part of the secret and is removed.
    Anything else, a second trailing line break included, is left for problems() to refuse."""
    if not isinstance(value, str):
        return value
    for end in ("\r\n", "\n"):
        if value.endswith(end):
            return value[: -len(end)]
    return value


def _breaks(text):
    """The line-breaking characters in text, named, in a fixed order."""
    return [name for char, name in LINE_BREAKS.items() if char in text]


def _words(value):
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [str(item) for item in value]
    return [str(value)]


def _line(name, value, what="it"):
    found = _breaks(str(value))
    if found:
        return [f"{name}: {what} holds {' and '.join(found)}, which would end its line in the file it is"
                " written to and start another; give it on one line."]
    return []


def _item_lines(name, value):
    """Each item of a list (or the one value) as one line of its file."""
    return [m for i, word in enumerate(_words(value)) for m in _line(name, word, f"item {i}")]


def _whole_number(name, value, kind):
    bounds = [int(b) for b in kind.split(":")[1:]]
    if isinstance(value, bool) or not re.fullmatch(r"-?[0-9]+", str(value).strip()):
        return [f"{name}: must be a whole number, got {str(value)!r}."]
    number = int(str(value).strip())
    if number < bounds[0]:
        return [f"{name}: must be at least {bounds[0]}, got {number}."]
    if len(bounds) > 1 and number > bounds[1]:
        return [f"{name}: must be at most {bounds[1]}, got {number}."]
    return []


def _launch_args(name, value, eagle3=False):
    out = _item_lines(name, value)
    words = _words(value)
    owned_flags = dict(OWNED_FLAGS, **(EAGLE3_FLAGS if eagle3 else {}))
    for word in words:
        flag = word.split("=", 1)[0]
        if not flag.startswith("--") or len(flag) < 3:
            continue
        # SGLang's parser also takes an unambiguous abbreviation of a flag (--ho for --host).
        owned = sorted({var for full, var in owned_flags.items() if full == flag or full.startswith(flag)})
        if owned:
            out.append(f"{name}: {flag} is spelt by the role; set {' or '.join(owned)} instead"
                       " (a second one on the command line would override it).")
    return out


BASE_URL = re.compile(r"^https?://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(:[0-9]{1,5})?$")


def truthy(value):
    """A setting as the roles' ``| bool`` reads it (Ansible's boolean): True, 1, 1.0, or y, yes, on,
    1, true or t in any case; anything else is false."""
    if isinstance(value, str):
        return value.strip().lower() in ("y", "yes", "on", "1", "true", "t")
    return value is True or (not isinstance(value, bool) and value in (1, 1.0))


def _check(name, kind, value, settings):
    if kind == "context":
        return []
    if kind.startswith("int:"):
        return _whole_number(name, value, kind)
    if kind == "secret":
        value = secret(value)
        found = _breaks(str(value or ""))
        if found:
            return [f"{name}: the secret holds {' and '.join(found)} (one trailing line break is removed,"
                    " nothing else is); it would add lines to the secrets file. Its value is not shown."]
        return []
    if kind == "line":
        return _line(name, "" if value is None else value)
    if kind == "lines":
        return _item_lines(name, value)
    if kind == "launch_args":
        return _launch_args(name, value, truthy(settings.get("sglang_service_eagle3_enabled", False)))
    if kind in ("env", "engine_env", "nccl_env"):
        if not isinstance(value, dict):
            return [f"{name}: must be a mapping of environment variable names to values."]
        out = []
        for key in sorted(value, key=str):
            if not ENV_NAME.match(str(key)):
                out.append(f"{name}: {str(key)!r} is not an environment variable name (letters, digits and _,"
                           " not starting with a digit).")
            elif kind == "nccl_env" and not str(key).startswith("NCCL_"):
                out.append(f"{name}: {str(key)!r} is not an NCCL variable (NCCL_...); set other variables in"
                           " sglang_service_environment.")
            out += _line(name, "" if value[key] is None else value[key], f"the value of {key}")
            if (kind == "engine_env" and key in sandbox.PATH_VARIABLES
                    and value[key] not in (None, "") and not str(value[key]).startswith("/")):
                out.append(f"{name}: {key} must be an absolute path, got {str(value[key])!r}: the engine's"
                           " sandbox cannot keep a relative or ~ path read-only.")
        return out
    if kind == "writable_paths":
        out = _item_lines(name, value)
        if out:
            return out
        home = settings.get("sglang_service_user_home") or settings.get("sglang_install_user_home") or "/var/lib/sglang"
        environment = settings.get("sglang_service_environment")
        return sandbox.engine_sandbox(home, environment if isinstance(environment, dict) else {},
                                      str(settings.get("sglang_service_model_path") or ""),
                                      str(settings.get("sglang_service_eagle3_draft_model_path") or ""),
                                      truthy(settings.get("sglang_service_eagle3_enabled", False)),
                                      truthy(settings.get("sglang_service_engine_downloads", False)),
                                      _words(value))["problems"]
    if kind in ("path", "shell_path"):
        text = "" if value is None else str(value)
        out = _line(name, text)
        if out or not text:
            return out
        if not text.startswith("/"):
            return [f"{name}: must be an absolute path, got {text!r}."]
        if kind == "shell_path" and not PLAIN_PATH.match(text):
            return [f"{name}: {text!r} is written unquoted into a shell script; use letters, digits and"
                    " / . _ + @ : - only."]
        if kind == "path" and re.search(r"\s", text):
            return [f"{name}: {text!r} holds whitespace, which the file it is written to reads as the end"
                    " of the path."]
        return []
    if kind in ("url", "urls"):
        out = []
        for i, word in enumerate(_words(value)):
            what = "it" if kind == "url" else f"item {i}"
            found = _line(name, word, what)
            if not found and re.search(r"\s", word):
                found = [f"{name}: {what} holds whitespace, which the file it is written to reads as a"
                         " separator between URLs; percent-encode it (%20)."]
            out += found
        return out
    if kind == "base_url":
        text = "" if value is None else str(value)
        if text and not BASE_URL.match(text):
            return [f"{name}: {text!r} is not http://host:port (or https://), without a path or a trailing /:"
                    " the role appends the router's paths to it."]
        return []
    if kind == "requirement":
        out = []
        for i, word in enumerate(_words(value)):
            found = _line(name, word, f"item {i}")
            if not found and word.lstrip().startswith("-"):
                # The option's name only: its value may be a URL with credentials.
                option = word.split()[0].split("=", 1)[0]
                found = [f"{name}: item {i} ({option!r}) is a pip option, not a requirement; the"
                         " package sources have settings of their own (sglang_install_index_url,"
                         " sglang_install_extra_index_urls, sglang_install_find_links)."]
            out += found
        return out
    if kind == "account":
        text = "" if value is None else str(value)
        if not text or ACCOUNT_FORBIDDEN.search(text) or text.startswith("-") or text.isdigit():
            return [f"{name}: {text!r} is not a user or group name (not empty, not digits alone, no leading -,"
                    " no whitespace, control characters, ':', '/' or '%')."]
        return []
    raise ValueError(f"unknown format {kind!r} for {name}")


def problems(settings, table=None):
    """One message per setting in ``settings`` (name to value) that would break the file it
    lands in, in the table's order. Names the table does not list are not judged."""
    table = TABLE if table is None else table
    out = []
    for name, kind in table.items():
        if name in settings:
            out += _check(name, kind, settings[name], settings)
    return out
