"""The one table of settings that land in line-oriented files, and what each format refuses
(plugins/plugin_utils/settings.py): the preflight play and each role's refusal call it through
the lookup blackwell.sglang.setting_problems.
"""
from __future__ import annotations

import ast
import re

import pytest
from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.blackwell.sglang.plugins.plugin_utils import settings
from conftest import ROOT

KEY = "sk-unitSECRETkey7c1e"


def test_defaults_of_every_role_pass():
    """Every role default that the table judges passes it (a default that is a template is
    judged where it is rendered, in the role)."""
    import yaml  # pylint: disable=import-outside-toplevel

    found = {}
    for defaults in sorted(ROOT.glob("roles/*/defaults/main.yml")):
        for name, value in yaml.safe_load(defaults.read_text()).items():
            if name in settings.TABLE and not (isinstance(value, str) and "{{" in value):
                found[name] = value
    assert len(found) > 30
    assert settings.problems(found) == []


def test_every_row_names_a_documented_setting():
    """A row of the table is a role variable with an argument spec, or a variable of the node
    play that the example inventory documents: no typo hides a setting."""
    specs = "\n".join(p.read_text() for p in ROOT.glob("roles/*/meta/argument_specs.yml"))
    example = (ROOT / "inventories" / "example" / "group_vars" / "sglang_nodes.yml").read_text()
    node_play = (ROOT / "playbooks" / "node.yml").read_text()
    assert [name for name in settings.TABLE if not re.search(rf"^\s+{name}:", specs, re.M)
            and not (name.startswith("sglang_rollout_") and f"# {name}:" in example and name in node_play)
            and not (name in settings.CONTEXT and f"# {name}:" in example)] == []


@pytest.mark.parametrize("name", ["sglang_service_api_key", "sglang_service_hf_token"])
def test_a_secret_with_a_line_break_is_refused_without_its_value(name):
    assert settings.problems({name: KEY + "\nLD_PRELOAD=/tmp/x.so"}) == [
        f"{name}: the secret holds a line break (\\n) (one trailing line break is removed, nothing else is);"
        " it would add lines to the secrets file. Its value is not shown."]
    assert settings.problems({name: KEY + "\r"}) == [
        f"{name}: the secret holds a carriage return (\\r) (one trailing line break is removed, nothing else"
        " is); it would add lines to the secrets file. Its value is not shown."]
    messages = settings.problems({name: "a\x00b\nc"})
    assert len(messages) == 1
    assert "a line break (\\n) and a NUL byte" in messages[0] and "a\x00b" not in messages[0]


def test_one_trailing_line_break_of_a_secret_is_removed_and_no_more():
    assert settings.secret(KEY + "\n") == KEY
    assert settings.secret(KEY + "\r\n") == KEY
    assert settings.secret(KEY) == KEY
    assert settings.secret("") == ""
    assert settings.secret(KEY + "\n\n") == KEY + "\n"
    assert settings.problems({"sglang_service_api_key": KEY + "\n"}) == []
    assert settings.problems({"sglang_service_api_key": KEY + "\r\n"}) == []
    assert len(settings.problems({"sglang_service_api_key": KEY + "\n\n"})) == 1


@pytest.mark.parametrize("name", ["sglang_service_model_path", "sglang_service_served_model_name",
                                  "sglang_service_eagle3_draft_model_path", "cuda13_toolkit_package",
                                  "sglang_model_revision"])
def test_a_line_value_with_a_line_break_is_refused(name):
    assert settings.problems({name: "/models/Qwen3-8B\nExecStartPre=/bin/sh"}) == [
        f"{name}: it holds a line break (\\n), which would end its line in the file it is written to and"
        " start another; give it on one line."]
    assert settings.problems({name: "/models/Qwen3-8B"}) == []


@pytest.mark.parametrize("url", ["", "http://10.0.0.1:30100", "https://router.lan", "http://[fd00::1]:30100"])
def test_a_router_url_is_scheme_host_and_port(url):
    assert settings.problems({"sglang_service_router_url": url}) == []


@pytest.mark.parametrize("url", ["router:30100", "http://10.0.0.1:30100/", "http://10.0.0.1:30100/v1",
                                 "tcp://10.0.0.1:30100", "http://a b:1"])
def test_a_router_url_the_role_cannot_append_a_path_to_is_refused(url):
    assert settings.problems({"sglang_service_router_url": url}) == [
        f"sglang_service_router_url: {url!r} is not http://host:port (or https://), without a path or a trailing /:"
        " the role appends the router's paths to it."]


def test_extra_args_word_with_a_line_break_and_owned_flags():
    assert settings.problems({"sglang_service_extra_args": ["--mem-fraction-static", "0.85"]}) == []
    assert settings.problems({"sglang_service_extra_args": ["--mem-fraction-static", "0.8\nExecStartPost=/x"]}) == [
        "sglang_service_extra_args: item 1 holds a line break (\\n), which would end its line in the file it is"
        " written to and start another; give it on one line."]
    assert settings.problems({"sglang_service_extra_args": ["--host", "0.0.0.0", "--api-key=k", "--tp", "4"]}) == [
        "sglang_service_extra_args: --host is spelt by the role; set sglang_service_host instead (a second one"
        " on the command line would override it).",
        "sglang_service_extra_args: --api-key is spelt by the role; set sglang_service_api_key instead (a"
        " second one on the command line would override it).",
        "sglang_service_extra_args: --tp is spelt by the role; set sglang_service_tp_size instead (a second one"
        " on the command line would override it)."]
    # The metrics endpoint is a switch of its own.
    assert settings.problems({"sglang_service_extra_args": ["--enable-metrics"]}) == [
        "sglang_service_extra_args: --enable-metrics is spelt by the role; set sglang_service_metrics_enabled"
        " instead (a second one on the command line would override it)."]
    # SGLang's other metrics flags stay the operator's to give.
    assert settings.problems({"sglang_service_extra_args": ["--enable-metrics-for-all-schedulers"]}) == []
    # An abbreviation the parser would take for one of them is refused as that one.
    assert settings.problems({"sglang_service_extra_args": ["--ho", "::"]}) == [
        "sglang_service_extra_args: --ho is spelt by the role; set sglang_service_host instead (a second one on"
        " the command line would override it)."]
    # Values and flags the role does not spell pass.
    assert settings.problems({"sglang_service_extra_args": ["--chunked-prefill-size", "--", "-1", "--hostname-x"]}) == []


def test_speculative_flags_are_the_roles_only_with_eagle3_on():
    """Other speculative decoding (NEXTN, EAGLE) is the operator's to give while EAGLE-3 is off."""
    args = ["--speculative-algorithm", "NEXTN", "--speculative-num-steps", "2"]
    assert settings.problems({"sglang_service_extra_args": args}) == []
    assert settings.problems({"sglang_service_extra_args": args, "sglang_service_eagle3_enabled": False}) == []
    assert settings.problems({"sglang_service_extra_args": args, "sglang_service_eagle3_enabled": True}) == [
        "sglang_service_extra_args: --speculative-algorithm is spelt by the role; set sglang_service_eagle3_enabled"
        " instead (a second one on the command line would override it).",
        "sglang_service_extra_args: --speculative-num-steps is spelt by the role; set"
        " sglang_service_eagle3_num_steps instead (a second one on the command line would override it)."]


def test_a_pip_option_is_named_without_its_value():
    """The value may be a URL with credentials: only the option's name is quoted."""
    messages = settings.problems({"sglang_install_extra_packages": [
        "--extra-index-url=https://__token__:S3CRET@mirror.example/simple"]})
    assert messages == [
        "sglang_install_extra_packages: item 0 ('--extra-index-url') is a pip option, not a requirement; the"
        " package sources have settings of their own (sglang_install_index_url, sglang_install_extra_index_urls,"
        " sglang_install_find_links)."]


@pytest.mark.parametrize("account", ["sglang", "svc.sglang", "sglang@corp.example", "Svc_Sglang", "_sglang"])
def test_account_names_directory_services_use_pass(account):
    assert settings.problems({"sglang_service_user": account}) == []


@pytest.mark.parametrize("account", ["", "sg lang", "sg:lang", "-sglang", "1000", "sg%ilang", "sg/lang", "sg\nlang"])
def test_account_names_that_would_break_the_unit_are_refused(account):
    assert settings.problems({"sglang_service_user": account}) == [
        f"sglang_service_user: {account!r} is not a user or group name (not empty, not digits alone, no leading -,"
        " no whitespace, control characters, ':', '/' or '%')."]


def test_nccl_environment_holds_nccl_variables_only():
    assert settings.problems({"sglang_service_nccl_environment": {"NCCL_P2P_DISABLE": "1", "NCCL_DEBUG": "WARN"}}) == []
    assert settings.problems({"sglang_service_nccl_environment": {"CUDA_VISIBLE_DEVICES": "0", "NCCL_IB_HCA": "a\nb"}}) == [
        "sglang_service_nccl_environment: 'CUDA_VISIBLE_DEVICES' is not an NCCL variable (NCCL_...); set other"
        " variables in sglang_service_environment.",
        "sglang_service_nccl_environment: the value of NCCL_IB_HCA holds a line break (\\n), which would end its"
        " line in the file it is written to and start another; give it on one line."]
    assert settings.problems({"sglang_service_nccl_environment": "NCCL_P2P_DISABLE=1"}) == [
        "sglang_service_nccl_environment: must be a mapping of environment variable names to values."]


def test_environment_names_and_values():
    assert settings.problems({"sglang_service_environment": {"NCCL_P2P_DISABLE": "1", "_X9": 2}}) == []
    assert settings.problems({"sglang_service_environment": {"NCCL DEBUG": "INFO", "9X": "1",
                                                             "NCCL_DEBUG": "INFO\nLD_PRELOAD=/x.so"}}) == [
        "sglang_service_environment: '9X' is not an environment variable name (letters, digits and _, not"
        " starting with a digit).",
        "sglang_service_environment: 'NCCL DEBUG' is not an environment variable name (letters, digits and _,"
        " not starting with a digit).",
        "sglang_service_environment: the value of NCCL_DEBUG holds a line break (\\n), which would end its line"
        " in the file it is written to and start another; give it on one line."]
    assert settings.problems({"sglang_service_environment": ["A=1"]}) == [
        "sglang_service_environment: must be a mapping of environment variable names to values."]


def test_paths_urls_requirements_accounts():
    assert settings.problems({
        "sglang_service_env_file": "/etc/sglang/my env",
        "sglang_install_venv": "opt/sglang",
        "cuda13_home": "/usr/local/cuda-13.0;id",
        "cuda13_repo_base_url": "https://mirror.example/cuda repos",
        "sglang_install_find_links": ["/srv/wheels", "/srv/other\nindex-url = http://evil"],
        "sglang_install_extra_packages": ["nvidia-nccl-cu13==2.32.3", "--index-url http://evil/simple"],
        "sglang_install_user": "sglang svc",
    }) == [
        "sglang_service_env_file: '/etc/sglang/my env' holds whitespace, which the file it is written to reads"
        " as the end of the path.",
        "sglang_install_extra_packages: item 1 ('--index-url') is a pip option, not a requirement; the package"
        " sources have settings of their own (sglang_install_index_url, sglang_install_extra_index_urls,"
        " sglang_install_find_links).",
        "sglang_install_find_links: item 1 holds a line break (\\n), which would end its line in the file it is"
        " written to and start another; give it on one line.",
        "sglang_install_user: 'sglang svc' is not a user or group name (not empty, not digits alone, no leading"
        " -, no whitespace, control characters, ':', '/' or '%').",
        "sglang_install_venv: must be an absolute path, got 'opt/sglang'.",
        "cuda13_repo_base_url: it holds whitespace, which the file it is written to reads as a separator"
        " between URLs; percent-encode it (%20).",
        "cuda13_home: '/usr/local/cuda-13.0;id' is written unquoted into a shell script; use letters, digits"
        " and / . _ + @ : - only.",
    ]


def test_whole_numbers_within_bounds():
    assert settings.problems({"sglang_service_health_delay": 0, "sglang_service_port": "70000",
                              "sglang_service_health_timeout": "soon", "sglang_service_start_limit_burst": True,
                              "sglang_service_restart_sec": 0, "sglang_service_nccl_smoke_timeout": "60"}) == [
        "sglang_service_port: must be at most 65535, got 70000.",
        "sglang_service_health_delay: must be at least 1, got 0.",
        "sglang_service_health_timeout: must be a whole number, got 'soon'.",
        "sglang_service_start_limit_burst: must be a whole number, got 'True'.",
    ]


def test_a_stop_that_cannot_outlast_the_drain_is_refused_with_either_set_alone():
    refused = ("sglang_service_timeout_stop_sec: must be at least 10 s above sglang_service_router_drain_timeout ({}),"
               " got {}: on SIGTERM SGLang finishes the requests it holds (it counts them every 5 s) and systemd kills "
               "it when TimeoutStopSec runs out, so a stop must outlast the drain.")
    assert settings.problems({"sglang_service_timeout_stop_sec": 70, "sglang_service_router_drain_timeout": 60}) == []
    assert settings.problems({"sglang_service_timeout_stop_sec": 69, "sglang_service_router_drain_timeout": 60}) == [
        refused.format(60, 69)]
    # The other one at its role's default (120 s to stop, 60 s to drain).
    assert settings.problems({"sglang_service_timeout_stop_sec": 30}) == [refused.format(60, 30)]
    assert settings.problems({"sglang_service_router_drain_timeout": 115}) == [refused.format(115, 120)]
    # A value its own row refuses is named once, by that row.
    assert settings.problems({"sglang_service_timeout_stop_sec": "soon"}) == [
        "sglang_service_timeout_stop_sec: must be a whole number, got 'soon'."]


def test_the_defaults_relations_assume_are_the_roles():
    import yaml  # pylint: disable=import-outside-toplevel

    defaults = {}
    for path in sorted(ROOT.glob("roles/*/defaults/main.yml")):
        defaults.update(yaml.safe_load(path.read_text()))
    assert settings.RELATED_DEFAULTS == {name: defaults[name] for name in settings.RELATED_DEFAULTS}
    assert {name for names, _check in settings.RELATIONS for name in names} == set(settings.RELATED_DEFAULTS)


def test_names_outside_the_table_are_not_judged():
    assert settings.problems({"sglang_preflight_unrelated": "pre\nsent", "unrelated": "\n"}) == []


def test_the_module_has_no_ansible_imports():
    tree = ast.parse((ROOT / "plugins" / "plugin_utils" / "settings.py").read_text())
    imported = [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]
    imported += [node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    # ansible-core's own modules; the collection's plain-Python plugin_utils are fine.
    assert [name for name in imported if name and (name == "ansible" or name.startswith("ansible."))] == []
    assert [name for name in imported if name and name.startswith("ansible_collections")] == [
        "ansible_collections.blackwell.sglang.plugins.plugin_utils"]


def test_truthy_reads_a_setting_as_the_roles_bool_filter_does():
    values = [True, False, None, 0, 1, 2, 1.0, 0.5, "y", "Yes", " on ", "1", "TRUE", "t", "n", "no", "off", "0",
              "false", "", "2", "yes please", [], {}]
    assert [settings.truthy(v) for v in values] == [boolean(v, strict=False) for v in values]


LIST_KINDS = ("lines", "urls", "base_urls", "links", "requirement", "debs", "writable_paths", "launch_args", "env_names",
              "matches:", "ints:")
DICT_KINDS = ("mapping", "env", "engine_env", "nccl_env")


def role_options() -> dict:
    """Every option of every entry point of every role: name -> its argument spec."""
    import yaml  # pylint: disable=import-outside-toplevel

    found = {}
    for path in sorted(ROOT.glob("roles/*/meta/argument_specs.yml")):
        for entry in yaml.safe_load(path.read_text())["argument_specs"].values():
            found.update(entry.get("options") or {})
    return found


def test_every_option_of_every_role_has_a_validator_of_its_type():
    """One row per option, a format of the option's type, both bounds on every whole number and
    the choices of the spec: an option added without a validator fails here."""
    options = role_options()
    assert len(options) > 150
    missing = sorted(name for name in options if name not in settings.TABLE)
    assert missing == []
    wrong = []
    for name, spec in options.items():
        kind = settings.TABLE[name]
        kind_type = spec.get("type", "str")
        if spec.get("choices"):
            ok = kind == "choice:" + "|".join(spec["choices"])
        elif kind_type == "bool":
            ok = kind == "bool"
        elif kind_type == "int":
            ok = kind.startswith(("int:", "opt_int:")) and len(kind.split(":")) == 3
        elif kind_type == "list":
            ok = kind.startswith(LIST_KINDS)
        elif kind_type == "dict":
            ok = kind in DICT_KINDS
        elif kind_type == "path":
            ok = kind in ("path", "shell_path")
        else:
            ok = not kind.startswith(LIST_KINDS + DICT_KINDS + ("bool", "choice:", "int:", "opt_int:"))
        if not ok:
            wrong.append((name, kind_type, spec.get("choices"), kind))
    assert wrong == []
    # Every whole number of the table has a lower and an upper bound.
    assert [name for name, kind in settings.TABLE.items()
            if kind.startswith(("int:", "opt_int:", "ints:")) and len(kind.split(":")) != 3] == []


def test_every_format_of_the_table_is_known():
    for name, kind in settings.TABLE.items():
        settings.problems({name: None})  # raises on a format _check does not know
        if kind.startswith(("match:", "matches:")):
            assert kind.split(":", 1)[1].rstrip("?") in settings.PATTERNS, name


def test_the_settings_a_review_found_reaching_nodes_are_refused_by_name():
    assert settings.problems({
        "sglang_service_extra_args": ["--config", "/etc/sglang/x.yaml", "--config=/x.yaml", "--conf", "y"],
        "sglang_service_environment": {"HF_TOKEN": "hf_x", "LD_PRELOAD": "/x.so", "WANDB_API_KEY": "k",
                                       "PATH": "/bin", "NCCL_DEBUG": "WARN"},
        "sglang_service_env_file": "/etc/sglang/%i.env",
        "sglang_service_router_url": "http://r:1\n",
        "sglang_service_router_drain_timeout": 0,
        "sglang_install_keep_releases": "0",
        "sglang_install_version": "latest",
        "sglang_service_crash_policy": "yolo",
        "sglang_router_port": "30100\nUser=root",
        "sglang_router_host": "0.0.0.0\nUser=root",
    }) == [
        "sglang_service_extra_args: --config would read an SGLang configuration file, whose settings would"
        " override what the role judged; give the flags themselves in sglang_service_extra_args.",
        "sglang_service_extra_args: --config would read an SGLang configuration file, whose settings would"
        " override what the role judged; give the flags themselves in sglang_service_extra_args.",
        "sglang_service_extra_args: --conf would read an SGLang configuration file, whose settings would"
        " override what the role judged; give the flags themselves in sglang_service_extra_args.",
        "sglang_service_environment: HF_TOKEN is set by the role; set sglang_service_hf_token instead.",
        "sglang_service_environment: LD_PRELOAD changes which code the engine loads, outside the release the"
        " gate judged; list it in sglang_service_environment_allowed if the site means it.",
        "sglang_service_environment: PATH is set by the role; set sglang_service_cuda_home and"
        " sglang_service_venv instead.",
        "sglang_service_environment: WANDB_API_KEY names a secret, and the unit it would be written to is"
        " readable by everyone on the node; the secrets the engine takes go to its root-only secrets file:"
        " sglang_service_hf_token, sglang_service_api_key.",
        "sglang_service_env_file: '/etc/sglang/%i.env' holds '%', which systemd reads as a specifier (%h, %n"
        " ...) in the unit it is written to.",
        "sglang_service_crash_policy: must be one of strict, warn, force, got 'yolo'.",
        "sglang_service_router_url: 'http://r:1\\n' is not http://host:port (or https://), without a path or a"
        " trailing /: the role appends the router's paths to it.",
        "sglang_service_router_drain_timeout: must be at least 1, got 0.",
        "sglang_install_version: must be an exact release such as 0.5.23, got 'latest'.",
        "sglang_install_keep_releases: must be at least 1, got 0.",
        "sglang_router_host: it holds a line break (\\n), which would end its line in the file it is written to"
        " and start another; give it on one line.",
        "sglang_router_port: must be a whole number, got '30100\\nUser=root'.",
    ]


def test_a_loading_variable_passes_once_the_site_allows_it_by_name_and_a_secret_never_does():
    environment = {"LD_PRELOAD": "/usr/lib/libjemalloc.so.2", "PYTHONPATH": "/opt/site", "SGLANG_API_KEY": "k"}
    assert settings.problems({"sglang_service_environment": environment,
                              "sglang_service_environment_allowed": ["LD_PRELOAD", "PYTHONPATH", "SGLANG_API_KEY"]}) == [
        "sglang_service_environment: SGLANG_API_KEY is set by the role; set sglang_service_api_key instead."]
    # The smoke test's environment follows the same rules.
    assert settings.problems({"sglang_service_nccl_smoke_environment": {"PYTHONPATH": "/opt/site"}}) == [
        "sglang_service_nccl_smoke_environment: PYTHONPATH changes which code the engine loads, outside the"
        " release the gate judged; list it in sglang_service_environment_allowed if the site means it."]
    assert settings.problems({"sglang_service_environment_allowed": ["LD_PRELOAD", "LD PRELOAD"]}) == [
        "sglang_service_environment_allowed: item 1 ('LD PRELOAD') is not an environment variable name."]


@pytest.mark.parametrize("value, ok", [(True, True), ("yes", True), ("off", True), (0, True), ("maybe", False),
                                       (2, False), ("", False), (None, False)])
def test_booleans(value, ok):
    found = settings.problems({"sglang_service_router_drain": value})
    assert found == ([] if ok else [f"sglang_service_router_drain: must be true or false, got {str(value)!r}."])


@pytest.mark.parametrize("url, ok", [
    ("https://mirror.example/simple", True), ("http://127.0.0.1:8080/simple", True), ("file:///srv/wheels", True),
    ("", True), ("http://", False), ("ftp://mirror.example/pub", False), ("mirror.example/simple", False),
    ("http://mirror.example:port/", False), ("file://", False)])
def test_urls_are_parsed(url, ok):
    found = settings.problems({"sglang_install_index_url": url})
    if ok:
        assert found == []
    else:
        assert len(found) == 1 and found[0].startswith(
            "sglang_install_index_url: it is not an http, https or file URL with a host or a path")


def test_a_url_refusal_quotes_only_the_scheme():
    found = settings.problems({"sglang_model_hf_endpoint": "ftp://user:S3CRET@hub.example/x"})
    assert found == ["sglang_model_hf_endpoint: it is not an http, https or file URL with a host or a path (its"
                     " scheme: 'ftp')."]


def test_find_links_take_urls_and_absolute_paths():
    assert settings.problems({"sglang_install_find_links": ["/srv/wheels", "https://w.example/links"]}) == []
    assert settings.problems({"sglang_router_find_links": ["wheels/", "/srv/my wheels"]}) == [
        "sglang_router_find_links: item 0 is not an http, https or file URL with a host or a path (its scheme: '').",
        "sglang_router_find_links: '/srv/my wheels' holds whitespace, which the file it is written to reads as the"
        " end of the path."]


@pytest.mark.parametrize("host, ok", [("0.0.0.0", True), ("::", True), ("127.0.0.1", True), ("node-1.lan", True),
                                      ("fd00::1", True), ("0.0.0.0 x", False), ("a_b", False), ("", False),
                                      ("-x.lan", False)])
def test_listen_addresses(host, ok):
    found = settings.problems({"sglang_service_host": host})
    assert found == ([] if ok else [f"sglang_service_host: {host!r} is not an IP address or a host name to listen on."])


def test_versions_digests_lists_of_numbers_and_packages():
    assert settings.problems({"sglang_install_version": "0.5.6.post2", "sglang_router_version": "0.3.2",
                              "sglang_install_uv_version": "0.13.9", "cuda13_version": "13.1",
                              "cuda13_driver_min_version": "580.65.06", "sglang_install_packages": ["python3-venv"],
                              "cuda13_driver_packages": ["nvidia-open=580.95.05-1"],
                              "sglang_service_nccl_smoke_sizes_kib": [64, "1024"]}) == []
    assert settings.problems({"cuda13_version": "12.8", "sglang_install_uv_sha256": ["ab" * 32, "xyz"],
                              "sglang_service_nccl_smoke_sizes_kib": [64, 0, "big"],
                              "cuda13_driver_packages": ["nvidia-open; rm -rf /"],
                              "cuda13_repo_key_fingerprint": "EB69 3B30"}) == [
        "sglang_service_nccl_smoke_sizes_kib: item 1 must be at least 1, got 0.",
        "sglang_service_nccl_smoke_sizes_kib: item 2 must be a whole number, got 'big'.",
        "sglang_install_uv_sha256: item 1 must be a sha256 digest (64 hexadecimal characters), got 'xyz'.",
        "cuda13_version: must be a CUDA 13 release such as 13.0, got '12.8'.",
        "cuda13_repo_key_fingerprint: must be an OpenPGP fingerprint (40 or 64 hexadecimal characters), got"
        " 'EB69 3B30'.",
        "cuda13_driver_packages: item 0 ('nvidia-open; rm -rf /') is not a Debian package name (optionally"
        " =version).",
    ]


def test_urls_written_where_everyone_reads_them_hold_no_credentials():
    assert settings.problems({"cuda13_repo_base_url": "https://u:S3CRET@mirror.example/cuda/repos",
                              "sglang_model_hf_endpoint": "https://hub.example/?token=S3CRET"}) == [
        "cuda13_repo_base_url: it holds a user, password or query: apt takes credentials from"
        " /etc/apt/auth.conf.d, which only root reads; the sources file is readable by everyone.",
        "sglang_model_hf_endpoint: it holds a user, password or query: the hub's token is sglang_model_hf_token,"
        " which only root's secrets file holds."]
    assert settings.problems({"cuda13_repo_base_url": "file:/srv/cuda-repo",
                              "sglang_model_hf_endpoint": "https://hub.example"}) == []


@pytest.mark.parametrize("url, allowed, ok", [
    ("http://mirror.lan/simple", [], False), ("http://mirror.lan/simple", ["mirror.lan"], True),
    ("http://MIRROR.lan:8080/simple", ["mirror.lan"], True), ("http://127.0.0.1:9/simple", [], True),
    ("http://[::1]:9/simple", [], True), ("http://localhost/simple", [], True), ("https://mirror.lan/simple", [], True)])
def test_plain_http_only_to_loopback_or_a_host_the_site_names(url, allowed, ok):
    found = settings.problems({"sglang_install_extra_index_urls": [url], "sglang_http_hosts_allowed": allowed})
    assert found == ([] if ok else [
        "sglang_install_extra_index_urls: item 0 is plain http to mirror.lan: anyone on the way could change what is"
        " downloaded. Use https, or list the host in sglang_http_hosts_allowed if the site trusts its network to it."])


def test_a_repository_is_downloaded_at_a_commit_unless_the_site_allows_a_branch():
    commit = "0123456789abcdef0123456789abcdef01234567"
    assert settings.problems({"sglang_model_repo_id": "org/m", "sglang_model_revision": commit}) == []
    assert settings.problems({"sglang_model_repo_id": "org/m", "sglang_model_revision": "v1.0",
                              "sglang_model_allow_moving_revision": True}) == []
    assert settings.problems({"sglang_model_repo_id": "", "sglang_model_revision": "main"}) == []
    assert settings.problems({"sglang_model_repo_id": "org/m", "sglang_model_revision": commit.upper()}) == [
        f"sglang_model_revision is '{commit.upper()}', which is not a commit: a branch or a tag moves, and the"
        " weights of org/m with it. Give the commit (the 40 hexadecimal characters of its revision on the hub), or"
        " set sglang_model_allow_moving_revision: true to follow a branch."]
    # Allowed to move, a revision must still be given.
    assert len(settings.problems({"sglang_model_draft_repo_id": "org/d",
                                  "sglang_model_allow_moving_revision": True})) == 1


def test_every_router_url_of_the_list_is_a_base_url():
    assert settings.problems({"sglang_service_router_urls": ["http://r1:30100", "https://[fd00::9]:30100"]}) == []
    assert settings.problems({"sglang_service_router_urls": ["http://r1:30100/", ""]}) == [
        "sglang_service_router_urls: item 0 ('http://r1:30100/') is not http://host:port (or https://), without a path "
        "or a trailing /: the role appends the router's paths to it.",
        "sglang_service_router_urls: item 1 ('') is not http://host:port (or https://), without a path or a trailing /:"
        " the role appends the router's paths to it."]
    assert settings.problems({"sglang_service_router_urls": "http://r1:30100"}) == [
        "sglang_service_router_urls: must be a list of http://host:port addresses."]
    assert settings.problems({"sglang_service_router_drain_policy": "open"}) != []
