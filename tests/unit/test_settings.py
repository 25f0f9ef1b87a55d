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
            and not (name.startswith("sglang_rollout_") and f"# {name}:" in example and name in node_play)] == []


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
                                  "sglang_service_eagle3_draft_model_path", "sglang_install_version",
                                  "cuda13_toolkit_package", "sglang_model_revision"])
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


def test_names_outside_the_table_are_not_judged():
    assert settings.problems({"sglang_service_state": "pre\nsent", "unrelated": "\n"}) == []


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
