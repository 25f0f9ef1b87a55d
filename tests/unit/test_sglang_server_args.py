"""The static reader of SGLang's flags: synthetic sources for each declaration style, then the
real releases from PyPI (0.5.4 to 0.5.23) for what the service role relies on."""
from __future__ import annotations

import ast

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils import sglang_server_args as core
from sglang_releases import unpack

ADD_ARGUMENT_SOURCE = '''
import argparse
from x import DeprecatedAction, DeprecatedStoreTrueAction

class ServerArgs:
    @staticmethod
    def add_cli_args(parser):
        parser.add_argument("--model-path", "--model", type=str, help="The model.")
        parser.add_argument("--old-knob", action=DeprecatedAction, help="Note: --old-knob is deprecated now.")
        parser.add_argument("--older-knob", action=DeprecatedStoreTrueAction, new_flag="--new-knob=on")
        parser.add_argument(
            "--enable-thing",
            action="store_true",
            help="(Deprecated: use --thing-backend=auto) " "Enable the thing.",
        )
        parser.add_argument("--thing-backend", choices=["auto"], help=f"Backend {1 + 1}.")
        parser.add_argument("--toggle", action=argparse.BooleanOptionalAction, help="On or off.")
        parser.add_argument("--other", help="This replaces the deprecated environment variable X.")
        group.add_argument("positional")
'''

FIELDS_SOURCE = '''
import argparse
from x import A, Arg, NS

class ServerArgs:
    tp_size: A[int, Arg(help="TP.", aliases=["--tensor-parallel-size"])] = 1
    enable_torch_symm_mem: A[bool, "Enable torch symm mem."] = False
    hidden: A[bool, Arg(no_cli=True)] = False
    renamed: A[str, Arg(cli_name="--other-name", help="x")] = ""
    switch: A[bool, Arg(help="s", action=argparse.BooleanOptionalAction)] = False
    namespaced: A[int, "help", NS("serving")] = 0
    plain: int = 0
    untagged: A[int, NS("x")] = 0

class PortArgs:
    not_a_flag: A[int, "never a server flag"] = 0
'''


def test_add_argument_calls_give_flags_aliases_and_deprecations():
    flags = core.flags_from_add_argument(ast.parse(ADD_ARGUMENT_SOURCE))
    assert sorted(flags) == [
        "--enable-thing", "--model", "--model-path", "--no-toggle", "--old-knob", "--older-knob",
        "--other", "--thing-backend", "--toggle",
    ]
    deprecated = {flag: entry["replacement"] for flag, entry in flags.items() if entry["deprecated"]}
    assert deprecated == {
        "--enable-thing": "--thing-backend=auto",
        "--old-knob": None,
        "--older-knob": "--new-knob=on",
    }


def test_annotated_fields_follow_the_dataclass_cli_rules():
    flags = core.flags_from_fields(ast.parse(FIELDS_SOURCE), class_names=("ServerArgs",))
    assert sorted(flags) == [
        "--enable-torch-symm-mem", "--namespaced", "--no-switch", "--other-name", "--switch",
        "--tensor-parallel-size", "--tp-size",
    ]
    assert not any(entry["deprecated"] for entry in flags.values())


def test_fusion_arguments_prefer_the_backend_flag_once_the_boolean_is_deprecated():
    legacy = {"flag": "--enable-flashinfer-allreduce-fusion", "deprecated": False, "replacement": None}
    backend = {"flag": "--flashinfer-allreduce-fusion-backend", "deprecated": False, "replacement": None}
    old = {legacy["flag"]: legacy}
    both = {legacy["flag"]: legacy, backend["flag"]: backend}
    new = {legacy["flag"]: dict(legacy, deprecated=True), backend["flag"]: backend}
    assert core.fusion_arguments(old) == ["--enable-flashinfer-allreduce-fusion"]
    assert core.fusion_arguments(both) == ["--enable-flashinfer-allreduce-fusion"]
    assert core.fusion_arguments(new) == ["--flashinfer-allreduce-fusion-backend", "auto"]
    assert core.fusion_arguments({backend["flag"]: backend}) == ["--flashinfer-allreduce-fusion-backend", "auto"]
    assert core.fusion_arguments({}) == []


def test_flags_in_reads_flags_from_argv_words():
    assert core.flags_in(["--a", "1", "--b=2", "--a", "-c", "--", "x"]) == ["--a", "--b"]


def test_a_directory_without_sglang_is_refused_with_its_reason(tmp_path):
    with pytest.raises(core.ReleaseScanError) as error:
        core.find_package_dir(path=str(tmp_path))
    assert str(error.value) == "%s is not an SGLang package: srt/server_args.py is missing" % tmp_path
    with pytest.raises(core.ReleaseScanError) as error:
        core.find_package_dir(venv=str(tmp_path))
    assert str(error.value) == "no sglang package under %s/lib/python3*/site-packages" % tmp_path


SERVICE_FLAGS = [
    "--model-path", "--served-model-name", "--host", "--port", "--tp-size", "--enable-torch-symm-mem",
    "--speculative-algorithm", "--speculative-draft-model-path", "--speculative-num-steps",
    "--speculative-eagle-topk", "--speculative-num-draft-tokens", "--api-key", "--enable-metrics",
]

# release: (fusion arguments, fusion raises off SM90/SM10X, PCIe IPC all-reduce, GET /ready)
RELEASES = {
    "0.5.4": (["--enable-flashinfer-allreduce-fusion"], False, False, False),
    "0.5.8": (["--enable-flashinfer-allreduce-fusion"], False, False, False),
    "0.5.15": (["--flashinfer-allreduce-fusion-backend", "auto"], True, False, False),
    "0.5.23": (["--flashinfer-allreduce-fusion-backend", "auto"], True, True, True),
}


@pytest.fixture(scope="module", params=sorted(RELEASES))
def release(request, tmp_path_factory):
    package_dir = unpack(request.param, tmp_path_factory.mktemp("sglang-" + request.param))
    return request.param, core.scan_release(str(package_dir))


@pytest.mark.slow
def test_real_release_has_the_service_flags_and_known_hazards(release):
    version, scanned = release
    fusion, restricted, pcie, ready = RELEASES[version]
    assert scanned["version"] == version
    assert [flag for flag in SERVICE_FLAGS if flag not in scanned["flags"]] == []
    assert scanned["fusion_arguments"] == fusion
    assert scanned["fusion_sm_restricted"] is restricted
    assert scanned["pcie_ipc_allreduce"] is pcie
    assert scanned["ready_endpoint"] is ready
    assert "--no-such-flag" not in scanned["flags"]


@pytest.mark.slow
def test_real_release_deprecations(release):
    version, scanned = release
    if version in ("0.5.15", "0.5.23"):
        assert scanned["deprecated"]["--enable-flashinfer-allreduce-fusion"] == "--flashinfer-allreduce-fusion-backend=auto"
    else:
        assert "--enable-flashinfer-allreduce-fusion" not in scanned["deprecated"]
    if version == "0.5.23":
        # Field-declared flags (arg_groups/fields) with their aliases, and manual deprecated spellings.
        assert {"--tensor-parallel-size", "--flashinfer-allreduce-fusion-backend"} <= set(scanned["flags"])
        assert scanned["deprecated"]["--enable-dp-attention"] == "--attn-dp-size <dp-size>"
