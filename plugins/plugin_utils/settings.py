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

import ipaddress
import re
from urllib.parse import urlsplit

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

# Formats: what each kind of value must be. Every line-breaking character is refused in every
# format but multiline; each format adds its own rules.
#   secret       a value of the root-only secrets file (double-quoted); one trailing line break
#                is removed first (see secret())
#   line         one value on one line of a unit, a requirement or a sources file (quoted where
#                the format quotes)
#   lines        a list of such values, one line or argv word each
#   multiline    text that is a file of its own (a key, a lock): no NUL byte, at most 1 MiB
#   env          a mapping of environment variable names to values (unit Environment= lines):
#                no name that carries a secret into the world-readable unit or is the role's own,
#                and no name that changes what code loads unless allowed by name
#                (sglang_service_environment_allowed)
#   engine_env   env, whose Hugging Face paths (sandbox.PATH_VARIABLES) are absolute
#   nccl_env     env of NCCL_ variables only (sglang_service_nccl_environment: the engine's and
#                the smoke test's)
#   env_names    a list of environment variable names
#   path         an absolute path, written unquoted into a unit or a sources file: no
#                whitespace, no '%' (systemd reads it as a specifier); empty means unset
#   shell_path   an absolute path written unquoted into a shell script (profile.d)
#   url          a URL in a whitespace-separated field (deb822 URIs, pip's index lists): parsed;
#                http, https or file, a host for http(s), no whitespace; empty means unset; plain
#                http only to loopback or to a host listed in sglang_http_hosts_allowed
#   url:WHERE    a url written where everyone on the node can read it: no user, password or
#                query, which CREDENTIAL_HOMES[WHERE] says where to put instead
#   urls         a list of such URLs
#   links        a list of such URLs or absolute paths (pip's and uv's find-links)
#   base_url     empty, or http(s)://host[:port] with no path: an address others append a path
#                to (SGLang's router: /workers)
#   base_urls    a list of such addresses, none empty
#   host         an address to listen on: an IP address or a host name
#   hub_repo:REV a Hugging Face repository id; set, the revision in setting REV must be a
#                40-hexadecimal commit unless sglang_model_allow_moving_revision is true
#   requirement  a list of requirement or constraint lines: none may be a pip option
#   account      a user or group name
#   debs         a list of Debian package names, each optionally =version
#   launch_args  sglang_service_extra_args: argv words; none of the flags the role spells, and
#                no --config (SGLang's config file would set what the role judged)
#   writable_paths  sglang_service_writable_paths: lines, none at or inside a path the engine
#                may only read (blackwell.sglang.engine_sandbox)
#   bool         true or false, as Ansible's bool filter reads them (yes/no, on/off, 1/0 too)
#   choice:A|B   one of the words given
#   match:NAME   a value PATTERNS[NAME] matches in full; match:NAME? also takes empty
#   matches:NAME a list of such values
#   int:MIN:MAX  a whole number within both bounds; opt_int:MIN:MAX also takes none (unset)
#   ints:MIN:MAX a list of such numbers
#   mapping      a mapping (a fact or a module's report the role reads, never written as text)
TABLE = {
    # sglang_service: the secrets file, the unit, the launcher's arguments, the gate.
    "sglang_service_state": "choice:present|absent",
    "sglang_service_api_key": "secret",
    "sglang_service_hf_token": "secret",
    "sglang_service_model_path": "line",
    "sglang_service_served_model_name": "line",
    "sglang_service_eagle3_draft_model_path": "line",
    "sglang_service_extra_args": "launch_args",
    "sglang_service_eagle3_enabled": "bool",
    "sglang_service_environment_allowed": "env_names",
    "sglang_service_environment": "engine_env",
    "sglang_service_nccl_smoke_environment": "env",
    "sglang_service_nccl_environment": "nccl_env",
    "sglang_service_host": "host",
    "sglang_service_venv": "path",
    "sglang_service_release_path": "path",
    "sglang_service_cuda_home": "path",
    "sglang_service_cuda_toolkit": "path",
    "sglang_service_env_file": "path",
    "sglang_service_writable_paths": "writable_paths",
    "sglang_service_user_home": "path",
    "sglang_service_engine_downloads": "bool",
    "sglang_service_user": "account",
    "sglang_service_group": "account",
    "sglang_service_limit_stack": "match:limit",
    "sglang_service_port": "int:1:65535",
    "sglang_service_allow_unauthenticated": "bool",
    "sglang_service_tp_size": "opt_int:1:64",
    "sglang_service_tp_size_fallback": "int:1:64",
    "sglang_service_gpu": "mapping",
    "sglang_service_torch_symm_mem_enabled": "bool",
    "sglang_service_flashinfer_fusion_enabled": "bool",
    "sglang_service_metrics_enabled": "bool",
    "sglang_service_pcie_ipc_allreduce": "choice:auto|always|never",
    "sglang_service_pcie_ipc_max_numel": "opt_int:1:1099511627776",
    "sglang_service_crash_policy": "choice:strict|warn|force",
    "sglang_service_secure_logging": "bool",
    "sglang_service_enabled": "bool",
    "sglang_service_router_url": "base_url",
    "sglang_service_router_urls": "base_urls",
    "sglang_service_router_drain_policy": "choice:strict|best_effort",
    "sglang_service_router_drain": "bool",
    "sglang_service_router_drain_timeout": "int:1:3600",
    "sglang_service_health_delay": "int:1:600",
    "sglang_service_health_timeout": "int:1:86400",
    "sglang_service_health_generate_enabled": "bool",
    "sglang_service_nccl_smoke": "choice:auto|always|never",
    "sglang_service_nccl_smoke_timeout": "int:1:3600",
    "sglang_service_nccl_smoke_sizes_kib": "ints:1:4194304",
    "sglang_service_nccl_smoke_check_mode": "bool",
    "sglang_service_nccl_version_policy": "choice:warn|fail|ignore",
    "sglang_service_restart_requested": "bool",
    "sglang_service_restart_sec": "int:0:3600",
    "sglang_service_start_limit_interval_sec": "int:0:86400",
    "sglang_service_start_limit_burst": "int:1:1000",
    "sglang_service_timeout_stop_sec": "int:1:86400",
    "sglang_service_limit_nofile": "int:1:1073741816",
    "sglang_service_eagle3_num_steps": "int:1:64",
    "sglang_service_eagle3_topk": "int:1:64",
    "sglang_service_eagle3_num_draft_tokens": "int:1:1024",
    # sglang_install: requirement, constraint and pip/uv source files, the account, the releases.
    "sglang_install_state": "choice:present|absent",
    "sglang_install_version": "match:release",
    "sglang_install_extras": "lines",
    "sglang_install_extra_packages": "requirement",
    "sglang_install_constraints": "requirement",
    "sglang_install_requirements_lock": "multiline",
    "sglang_install_index_url": "url",
    "sglang_install_extra_index_urls": "urls",
    "sglang_install_find_links": "links",
    "sglang_install_no_index": "bool",
    "sglang_install_no_deps": "bool",
    "sglang_install_user": "account",
    "sglang_install_group": "account",
    "sglang_install_user_home": "path",
    "sglang_install_releases_dir": "path",
    "sglang_install_venv": "path",
    "sglang_install_activate": "bool",
    "sglang_install_keep_releases": "int:1:20",
    "sglang_install_python": "path",
    "sglang_install_packages": "debs",
    "sglang_install_installer": "choice:uv|pip",
    "sglang_install_uv_version": "match:release",
    "sglang_install_uv_sha256": "matches:sha256",
    "sglang_install_uv_venv": "path",
    "sglang_install_compile_bytecode": "bool",
    "sglang_install_torch_cuda_policy": "choice:warn|fail|ignore",
    "sglang_install_torch_cuda_major": "int:11:20",
    "sglang_install_nccl_floor_policy": "choice:auto|always|never",
    "sglang_install_nccl_floor": "match:floor",
    "sglang_install_nccl_package": "match:package",
    "sglang_install_gpu_facts_gather": "bool",
    "sglang_install_nvidia_smi": "path",
    # cuda13: the deb822 sources file, profile.d, ld.so.conf.d, the driver.
    "cuda13_version": "match:cuda13",
    "cuda13_repo_base_url": "url:apt",
    "cuda13_repo_distro": "line",
    "cuda13_repo_key_content": "multiline",
    "cuda13_repo_key_url": "url:apt",
    "cuda13_repo_key_fingerprint": "match:fingerprint?",
    "cuda13_repo_keyring_path": "path",
    "cuda13_repo_legacy_list_remove": "bool",
    "cuda13_home": "shell_path",
    "cuda13_toolkit_package": "line",
    "cuda13_toolkit_version": "line",
    "cuda13_toolkit_dir": "path",
    "cuda13_toolkit_hold": "bool",
    "cuda13_previous_toolkits": "choice:keep|remove",
    "cuda13_env_enabled": "bool",
    "cuda13_preflight_enabled": "bool",
    "cuda13_verify_enabled": "bool",
    "cuda13_driver_min_version": "match:driver",
    "cuda13_nvidia_smi": "path",
    "cuda13_gpu_facts_gather": "bool",
    "cuda13_secure_boot_efivar": "path",
    "cuda13_driver_mok_key": "path",
    "cuda13_driver_manage": "bool",
    "cuda13_driver_packages": "debs",
    "cuda13_driver_reboot": "bool",
    "cuda13_driver_reboot_timeout": "int:60:7200",
    # sglang_sm120_patch: the patch module's inputs.
    "sglang_sm120_patch_state": "choice:present|absent",
    "sglang_sm120_patch_venv": "path",
    "sglang_sm120_patch_venv_info": "mapping",
    "sglang_sm120_patch_capabilities": "ints:1:99",
    "sglang_sm120_patch_source_capability": "int:1:99",
    "sglang_sm120_patch_min_capability": "int:1:99",
    "sglang_sm120_patch_values": "mapping",
    "sglang_sm120_patch_missing_policy": "choice:skip|fail",
    "sglang_sm120_patch_purge_bytecode": "bool",
    "sglang_sm120_patch_backup": "bool",
    "sglang_sm120_patch_nvidia_smi": "path",
    "sglang_sm120_patch_gpu_facts_gather": "bool",
    # sglang_router: its unit, its sources, its workers.
    "sglang_router_state": "choice:present|absent",
    "sglang_router_version": "match:release",
    "sglang_router_sha256": "matches:sha256",
    "sglang_router_home": "path",
    "sglang_router_index_url": "url",
    "sglang_router_find_links": "links",
    "sglang_router_no_index": "bool",
    "sglang_router_user": "account",
    "sglang_router_group": "account",
    "sglang_router_host": "host",
    "sglang_router_port": "int:1:65535",
    "sglang_router_allow_unauthenticated": "bool",
    "sglang_router_workers_group": "line",
    "sglang_router_workers": "lines",
    "sglang_router_policy": "choice:cache_aware|round_robin|random|power_of_two",
    "sglang_router_api_key": "secret",
    "sglang_router_metrics_host": "host",
    "sglang_router_metrics_port": "int:1:65535",
    "sglang_router_request_timeout": "int:1:86400",
    "sglang_router_shutdown_grace": "int:0:3600",
    "sglang_router_extra_args": "lines",
    "sglang_router_health_timeout": "int:1:3600",
    "sglang_router_health_delay": "int:1:600",
    # playbooks/node.yml: the node's converge lock.
    "sglang_rollout_lock_path": "path",
    "sglang_rollout_lock_timeout": "int:0:86400",
    "sglang_rollout_lock_break": "line",
    # playbooks/preflight.yml and node.yml: a converge run as one slice of a sliced AWX job
    # (blackwell.sglang.rollout_slicing).
    "sglang_rollout_allow_sliced": "bool",
    "sglang_rollout_slice_count": "opt_int:1:1000",
    # Every role's sources: the hosts plain http may fetch from (read by the url formats).
    "sglang_http_hosts_allowed": "lines",
    # sglang_model: the model's names, where it goes and the hub mirror.
    "sglang_model_repo_id": "hub_repo:sglang_model_revision",
    "sglang_model_revision": "line",
    "sglang_model_source_path": "line",
    "sglang_model_source_mode": "choice:link|copy",
    "sglang_model_allow_moving_revision": "bool",
    "sglang_model_dest": "line",
    "sglang_model_draft_repo_id": "hub_repo:sglang_model_draft_revision",
    "sglang_model_draft_revision": "line",
    "sglang_model_draft_source_path": "line",
    "sglang_model_draft_dest": "line",
    "sglang_model_models_dir": "path",
    "sglang_model_user": "account",
    "sglang_model_group": "account",
    "sglang_model_venv": "path",
    "sglang_model_hf_cache": "path",
    "sglang_model_hf_endpoint": "url:hub",
    "sglang_model_hf_token": "secret",
    "sglang_model_env_file": "path",
    "sglang_model_allow_patterns": "lines",
    "sglang_model_expected_files": "lines",
    "sglang_model_check_headers": "bool",
    "sglang_model_secure_logging": "bool",
}

# The values match:NAME takes: (pattern, what it is, for the message).
PATTERNS = {
    "release": (r"[0-9]+(\.[0-9]+)*((a|b|rc)[0-9]+)?(\.post[0-9]+)?(\.dev[0-9]+)?(\+[a-z0-9.]+)?",
                "an exact release such as 0.5.23"),
    "cuda13": (r"13\.[0-9]{1,2}", "a CUDA 13 release such as 13.0"),
    "driver": (r"[0-9]{3}(\.[0-9]{1,3}){1,2}", "a driver version such as 580.65.06"),
    # Spaced as gpg prints it, or not.
    "fingerprint": (r"( *[0-9A-Fa-f]){40} *|( *[0-9A-Fa-f]){64} *",
                    "an OpenPGP fingerprint (40 or 64 hexadecimal characters)"),
    "sha256": (r"[0-9A-Fa-f]{64}", "a sha256 digest (64 hexadecimal characters)"),
    "package": (r"[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?", "a Python package name such as nvidia-nccl-cu13"),
    # A floor is a final release (a local part is no version specifier's).
    "floor": (r"[0-9]+(\.[0-9]+)*(\.post[0-9]+)?", "a final release such as 2.31.2 (quoted in YAML)"),
    "limit": (r"[0-9]{1,19}[KMGTPE]?|infinity", "a size in bytes (a K, M, G, T, P or E suffix allowed) or infinity"),
}

# Environment names the role sets itself, or that carry what the world-readable unit must not
# hold: each names the setting to use instead.
ENV_OWNED = {
    "HF_TOKEN": "sglang_service_hf_token",
    "HUGGING_FACE_HUB_TOKEN": "sglang_service_hf_token",
    "SGLANG_API_KEY": "sglang_service_api_key",
    "CUDA_HOME": "sglang_service_cuda_home",
    "PATH": "sglang_service_cuda_home and sglang_service_venv",
}
# A name ending so carries a secret: it belongs in the root-only secrets file.
ENV_SECRET = re.compile(r"(^|_)(TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIALS?)\Z", re.IGNORECASE)
# Names that change which code a process loads: refused unless allowed by name.
ENV_LOADING = ("LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP",
               "PYTHONUSERBASE", "PYTHONPLATLIBDIR", "PYTHONBREAKPOINT", "PYTHONEXECUTABLE")
# Where the credentials of a URL that lands in a world-readable file go instead.
CREDENTIAL_HOMES = {
    "apt": "apt takes credentials from /etc/apt/auth.conf.d, which only root reads; the sources file is"
           " readable by everyone",
    "hub": "the hub's token is sglang_model_hf_token, which only root's secrets file holds",
}
# SGLang's own configuration file, read by the launcher: what it sets bypasses the role's judgement.
CONFIG_FLAG = "--config"
MAX_TEXT = 1 << 20
# Settings read by the formats of other roles' settings: judged with whichever role asks.
CONTEXT = ("sglang_http_hosts_allowed",)


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


def _whole_number(name, value, kind, what=""):
    """kind: int:MIN:MAX or opt_int:MIN:MAX (none and empty pass)."""
    bounds = [int(b) for b in kind.split(":")[1:]]
    lead = f"{name}: {what}" if what else f"{name}:"
    if kind.startswith("opt_") and value in (None, ""):
        return []
    if isinstance(value, bool) or not re.fullmatch(r"-?[0-9]+", str(value).strip()):
        return [f"{lead} must be a whole number, got {str(value)!r}."]
    number = int(str(value).strip())
    if number < bounds[0]:
        return [f"{lead} must be at least {bounds[0]}, got {number}."]
    if len(bounds) > 1 and number > bounds[1]:
        return [f"{lead} must be at most {bounds[1]}, got {number}."]
    return []


BOOLEANS = ("y", "yes", "on", "1", "true", "t", "n", "no", "off", "0", "false", "f")


def _boolean(name, value):
    if isinstance(value, bool) or (not isinstance(value, float) and value in (0, 1)):
        return []
    if isinstance(value, str) and value.strip().lower() in BOOLEANS:
        return []
    return [f"{name}: must be true or false, got {str(value)!r}."]


def _choice(name, value, kind):
    words = kind.split(":", 1)[1].split("|")
    if str(value) in words and not isinstance(value, bool):
        return []
    return [f"{name}: must be one of {', '.join(words)}, got {str(value)!r}."]


def _match(name, value, kind, what="it"):
    pattern_name = kind.split(":", 1)[1]
    optional = pattern_name.endswith("?")
    pattern, meaning = PATTERNS[pattern_name.rstrip("?")]
    text = "" if value is None else str(value)
    out = _line(name, text, what)
    if out or (optional and not text):
        return out
    if not re.fullmatch(pattern, text):
        lead = f"{name}:" if what == "it" else f"{name}: {what}"
        return [f"{lead} must be {meaning}, got {text!r}."]
    return []


def _environment(name, value, kind, settings):
    if not isinstance(value, dict):
        return [f"{name}: must be a mapping of environment variable names to values."]
    allowed = set(_words(settings.get("sglang_service_environment_allowed")))
    out = []
    for key in sorted(value, key=str):
        text = str(key)
        if not ENV_NAME.match(text):
            out.append(f"{name}: {text!r} is not an environment variable name (letters, digits and _,"
                       " not starting with a digit).")
        elif kind == "nccl_env" and not text.startswith("NCCL_"):
            out.append(f"{name}: {text!r} is not an NCCL variable (NCCL_...); set other variables in"
                       " sglang_service_environment.")
        elif text in ENV_OWNED:
            out.append(f"{name}: {text} is set by the role; set {ENV_OWNED[text]} instead.")
        elif ENV_SECRET.search(text):
            out.append(f"{name}: {text} names a secret, and the unit it would be written to is readable by"
                       " everyone on the node; the secrets the engine takes go to its root-only secrets file:"
                       " sglang_service_hf_token, sglang_service_api_key.")
        elif text in ENV_LOADING and text not in allowed:
            out.append(f"{name}: {text} changes which code the engine loads, outside the release the gate"
                       f" judged; list it in sglang_service_environment_allowed if the site means it.")
        out += _line(name, "" if value[key] is None else value[key], f"the value of {key}")
        if (kind == "engine_env" and key in sandbox.PATH_VARIABLES
                and value[key] not in (None, "") and not str(value[key]).startswith("/")):
            out.append(f"{name}: {key} must be an absolute path, got {str(value[key])!r}: the engine's"
                       " sandbox cannot keep a relative or ~ path read-only.")
    return out


def _path(name, value, kind, what="it"):
    text = "" if value is None else str(value)
    out = _line(name, text, what)
    if out or not text:
        return out
    shown = f"{name}:" if what == "it" else f"{name}: {what}"
    if not text.startswith("/"):
        return [f"{shown} must be an absolute path, got {text!r}."]
    if kind == "shell_path" and not PLAIN_PATH.match(text):
        return [f"{name}: {text!r} is written unquoted into a shell script; use letters, digits and"
                " / . _ + @ : - only."]
    if re.search(r"\s", text):
        return [f"{name}: {text!r} holds whitespace, which the file it is written to reads as the end"
                " of the path."]
    if "%" in text:
        return [f"{name}: {text!r} holds '%', which systemd reads as a specifier (%h, %n ...) in the unit"
                " it is written to."]
    return []


def _loopback(host):
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host.lower().rstrip(".") == "localhost"


def _url(name, word, what, settings=None):
    found = _line(name, word, what)
    if found or not word:
        return found
    if re.search(r"\s", word):
        return [f"{name}: {what} holds whitespace, which the file it is written to reads as a"
                " separator between URLs; percent-encode it (%20)."]
    try:
        parts = urlsplit(word)
        parts.port  # pylint: disable=pointless-statement  # raises on a port that is not a number
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https", "file") or (
            parts.scheme != "file" and not parts.hostname) or (parts.scheme == "file" and not parts.path):
        # Only the scheme is quoted: the rest may hold credentials.
        scheme = parts.scheme if parts is not None else ""
        return [f"{name}: {what} is not an http, https or file URL with a host or a path (its scheme:"
                f" {scheme!r})."]
    allowed = [str(h).lower() for h in _words((settings or {}).get("sglang_http_hosts_allowed"))]
    if parts.scheme == "http" and not _loopback(parts.hostname) and parts.hostname.lower() not in allowed:
        return [f"{name}: {what} is plain http to {parts.hostname}: anyone on the way could change what is"
                " downloaded. Use https, or list the host in sglang_http_hosts_allowed if the site trusts"
                " its network to it."]
    return []


def _hub_repo(name, value, revision_name, settings):
    """A repository to download: its revision (unset is empty) must be a commit, where a branch or
    a tag would let the weights change under the same settings, unless the site allows that."""
    text = "" if value is None else str(value)
    out = _line(name, text)
    if out or not text:
        return out
    revision = str(settings.get(revision_name) or "")
    if re.fullmatch(r"[0-9a-f]{40}", revision):
        return []
    if revision and truthy(settings.get("sglang_model_allow_moving_revision", False)):
        return []
    shown = f"{revision!r}, which is not a commit" if revision else "not set"
    return [f"{revision_name} is {shown}: a branch or a tag moves, and the weights of {text} with it. Give the"
            " commit (the 40 hexadecimal characters of its revision on the hub), or set"
            " sglang_model_allow_moving_revision: true to follow a branch."]


def _host(name, value):
    text = "" if value is None else str(value)
    out = _line(name, text)
    if out:
        return out
    try:
        ipaddress.ip_address(text)
        return []
    except ValueError:
        pass
    if not re.fullmatch(r"(?=.{1,253}\Z)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}"
                        r"[A-Za-z0-9])?)*\.?", text):
        return [f"{name}: {text!r} is not an IP address or a host name to listen on."]
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
        if CONFIG_FLAG.startswith(flag):
            out.append(f"{name}: {flag} would read an SGLang configuration file, whose settings would override"
                       " what the role judged; give the flags themselves in sglang_service_extra_args.")
        elif owned:
            out.append(f"{name}: {flag} is spelt by the role; set {' or '.join(owned)} instead"
                       " (a second one on the command line would override it).")
    return out


BASE_URL = re.compile(r"https?://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(:[0-9]{1,5})?")


def truthy(value):
    """A setting as the roles' ``| bool`` reads it (Ansible's boolean): True, 1, 1.0, or y, yes, on,
    1, true or t in any case; anything else is false."""
    if isinstance(value, str):
        return value.strip().lower() in ("y", "yes", "on", "1", "true", "t")
    return value is True or (not isinstance(value, bool) and value in (1, 1.0))


def _check(name, kind, value, settings):
    if kind.startswith(("int:", "opt_int:")):
        return _whole_number(name, value, kind)
    if kind.startswith("ints:"):
        if not isinstance(value, (list, tuple)):
            return [f"{name}: must be a list of whole numbers."]
        bounds = "int:" + kind.split(":", 1)[1]
        return [m for i, item in enumerate(value) for m in _whole_number(name, item, bounds, f"item {i}")]
    if kind == "bool":
        return _boolean(name, value)
    if kind.startswith("choice:"):
        return _choice(name, value, kind)
    if kind.startswith("match:"):
        return _match(name, value, kind)
    if kind.startswith("matches:"):
        if not isinstance(value, (list, tuple)):
            return [f"{name}: must be a list."]
        each = "match:" + kind.split(":", 1)[1]
        return [m for i, item in enumerate(value) for m in _match(name, item, each, f"item {i}")]
    if kind == "mapping":
        return [] if isinstance(value, dict) else [f"{name}: must be a mapping."]
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
    if kind == "multiline":
        text = "" if value is None else str(value)
        if "\x00" in text:
            return [f"{name}: holds a NUL byte."]
        if len(text.encode("utf-8", "surrogateescape")) > MAX_TEXT:
            return [f"{name}: is longer than {MAX_TEXT} bytes."]
        return []
    if kind == "launch_args":
        return _launch_args(name, value, truthy(settings.get("sglang_service_eagle3_enabled", False)))
    if kind in ("env", "engine_env", "nccl_env"):
        return _environment(name, value, kind, settings)
    if kind == "env_names":
        return [f"{name}: item {i} ({word!r}) is not an environment variable name."
                for i, word in enumerate(_words(value)) if not ENV_NAME.match(word)]
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
        return _path(name, value, kind)
    if kind == "url":
        return _url(name, "" if value is None else str(value), "it", settings)
    if kind.startswith("url:"):
        text = "" if value is None else str(value)
        found = _url(name, text, "it", settings)
        if not found and text and ("@" in urlsplit(text).netloc or urlsplit(text).query):
            found = [f"{name}: it holds a user, password or query: {CREDENTIAL_HOMES[kind[4:]]}."]
        return found
    if kind == "urls":
        return [m for i, word in enumerate(_words(value)) for m in _url(name, word, f"item {i}", settings)]
    if kind == "links":
        return [m for i, word in enumerate(_words(value))
                for m in (_path(name, word, "path", f"item {i}") if word.startswith("/")
                          else _url(name, word, f"item {i}", settings))]
    if kind == "base_url":
        text = "" if value is None else str(value)
        if text and not BASE_URL.fullmatch(text):
            return [f"{name}: {text!r} is not http://host:port (or https://), without a path or a trailing /:"
                    " the role appends the router's paths to it."]
        return []
    if kind == "base_urls":
        if not isinstance(value, (list, tuple)):
            return [f"{name}: must be a list of http://host:port addresses."]
        return [f"{name}: item {i} ({str(word)!r}) is not http://host:port (or https://), without a path or a"
                " trailing /: the role appends the router's paths to it."
                for i, word in enumerate(value) if not BASE_URL.fullmatch("" if word is None else str(word))]
    if kind == "host":
        return _host(name, value)
    if kind.startswith("hub_repo:"):
        return _hub_repo(name, value, kind.split(":", 1)[1], settings)
    if kind == "debs":
        return [f"{name}: item {i} ({word!r}) is not a Debian package name (optionally =version)."
                for i, word in enumerate(_words(value))
                if not re.fullmatch(r"[a-z0-9][a-z0-9+.-]+(=[A-Za-z0-9.+~:-]+)?", word)]
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


def _stop_outlasts_drain(values):
    stop, drain = int(values["sglang_service_timeout_stop_sec"]), int(values["sglang_service_router_drain_timeout"])
    if stop >= drain + STOP_MARGIN:
        return []
    return [f"sglang_service_timeout_stop_sec: must be at least {STOP_MARGIN} s above "
            f"sglang_service_router_drain_timeout ({drain}), got {stop}: on SIGTERM SGLang finishes the requests it "
            "holds (it counts them every 5 s) and systemd kills it when TimeoutStopSec runs out, so a stop must "
            "outlast the drain."]


# How far TimeoutStopSec must outlast the drain: SGLang notices SIGTERM and counts the requests it
# still holds every 5 s, so its own drain ends up to two looks after the last request.
STOP_MARGIN = 10
# Settings judged together, each check run when any of its names is set and each name passes its
# own row; a name not set takes its role's default (RELATED_DEFAULTS, which a unit test holds
# equal to the roles' defaults/main.yml).
RELATIONS = ((("sglang_service_timeout_stop_sec", "sglang_service_router_drain_timeout"), _stop_outlasts_drain),)
RELATED_DEFAULTS = {"sglang_service_timeout_stop_sec": 120, "sglang_service_router_drain_timeout": 60}


def problems(settings, table=None):
    """One message per setting in ``settings`` (name to value) that would break the file it
    lands in, in the table's order, then those of settings judged together (RELATIONS). Names
    the table does not list are not judged."""
    table = TABLE if table is None else table
    out = []
    wrong = set()
    for name, kind in table.items():
        if name in settings:
            found = _check(name, kind, settings[name], settings)
            out += found
            wrong.update([name] if found else [])
    for names, check in RELATIONS:
        if any(name in settings for name in names) and not wrong.intersection(names) and all(
                name in table for name in names):
            out += check(dict((name, settings.get(name, RELATED_DEFAULTS[name])) for name in names))
    return out
