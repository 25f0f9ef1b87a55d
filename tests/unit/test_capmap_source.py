"""The capmap core on generated sources: each layout SGLang or a person could write.

Each case asserts the exact output (golden file under tests/fixtures/capmap/), that the edit is
an insertion only, that the output compiles and evaluates to the intended dict, that a second
pass changes nothing, and that removing the entry gives back the original text.
"""
from __future__ import annotations

import ast

import pytest
from capmap_checks import evaluate, insertions_only

from ansible_collections.blackwell.sglang.plugins.module_utils import capmap
from conftest import ROOT

GOLDEN = ROOT / "tests" / "fixtures" / "capmap"

CLASS_ANNOTATED = '''\
from typing import Dict, List


class Communicator:
    """Holds a capability-keyed class attribute, annotated."""

    # Sizes that take the multimem path.
    SIZES: Dict[int, List[int]] = {
        9: [4, 6, 8],
        10: [6, 8],
    }

    def __init__(self):
        self.disabled = True
'''

ONE_LINE = '''\
LIMITS = {9: [4, 6, 8], 10: [6, 8]}
OTHER = {1: 2}
'''

ONE_LINE_TRAILING_COMMA = '''\
LIMITS = {9: [4, 6, 8], 10: [6, 8],}  # per major
'''

COMMENTS = '''\
MiB = 1024 * 1024

LIMITS = {
    9: {
        2: 64 * MiB,  # 64 MB
        8: 128 * MiB,  # 128 MB
    },  # Hopper
    # SM100 parts
    10: {
        2: 64 * MiB,  # 64 MB
        8: 128 * MiB,  # 128 MB
    },  # Blackwell datacenter
    # 11 is not used by any part yet
}
'''

NO_TRAILING_COMMA = '''\
LIMITS = {
    9: [4, 6, 8],
    10: [6, 8]  # SM100
}
'''

TABS = '''\
class Communicator:
\tSIZES = {
\t\t9: [4, 6, 8],
\t\t10: [6, 8],
\t}
'''

BRACE_ON_LAST_LINE = '''\
LIMITS = {
    9: [4, 6, 8],
    10: [6, 8]}
'''

NESTED_CLASS = '''\
class Outer:
    class Inner:
        SIZES = {9: [4], 10: [6, 8]}
'''

UNICODE = '''\
# Größen je Rechenfähigkeit
LIMITS = {"ä": 1, 9: "µs", 10: "µs ×2"}  # ünïcode
'''

# (case, source, dotted name, values entry or None, expected key-12 value)
CASES = [
    ("class_annotated", CLASS_ANNOTATED, "Communicator.SIZES", None, [6, 8]),
    ("one_line", ONE_LINE, "LIMITS", None, [6, 8]),
    ("one_line_trailing_comma", ONE_LINE_TRAILING_COMMA, "LIMITS", None, [6, 8]),
    ("comments", COMMENTS, "LIMITS", None, {2: 64 << 20, 8: 128 << 20}),
    ("no_trailing_comma", NO_TRAILING_COMMA, "LIMITS", None, [6, 8]),
    ("tabs", TABS, "Communicator.SIZES", None, [6, 8]),
    ("brace_on_last_line", BRACE_ON_LAST_LINE, "LIMITS", None, [6, 8]),
    ("nested_class", NESTED_CLASS, "Outer.Inner.SIZES", None, [6, 8]),
    ("unicode", UNICODE, "LIMITS", None, "µs ×2"),
    ("values_override", CLASS_ANNOTATED, "Communicator.SIZES", "[]", []),
    ("values_expression", COMMENTS, "LIMITS", "{2: 32 * MiB}", {2: 32 << 20}),
]


def _golden(case: str) -> str:
    return (GOLDEN / f"{case}.after").read_text(encoding="utf-8")


def _variants():
    for case, source, name, value, expected in CASES:
        yield pytest.param(case, source, name, value, expected, "\n", id=case)
    # Windows line endings: the same cases with CRLF in and CRLF expected out.
    for case, source, name, value, expected in CASES[:5]:
        yield pytest.param(case, source.replace("\n", "\r\n"), name, value, expected, "\r\n",
                           id=f"{case}-crlf")


@pytest.mark.parametrize("case, source, name, value, expected, eol", list(_variants()))
def test_add_entry_matches_golden_and_round_trips(case, source, name, value, expected, eol):
    after, status = capmap.add_entry(source, name, 12, 10, value, label=f"{case}.py")
    assert status == "added"
    assert after == _golden(case).replace("\n", eol)
    assert insertions_only(source, after)
    compile(after, f"{case}.py", "exec")
    patched = evaluate(after, name)
    assert patched[12] == expected
    if value is None:
        assert patched[12] == patched[10]
    assert {k: v for k, v in patched.items() if k != 12} == evaluate(source, name)
    # A second pass is a no-op and knows the entry is its own.
    assert capmap.add_entry(after, name, 12, 10, value, label=f"{case}.py") == (after, "already present")
    # state=absent gives back the original text exactly.
    assert capmap.remove_entry(after, name, 12, label=f"{case}.py") == (source, "removed")
    assert capmap.remove_entry(source, name, 12, label=f"{case}.py") == (source, "not present")


def test_changed_value_updates_own_entry_only():
    first = capmap.add_entry(CLASS_ANNOTATED, "Communicator.SIZES")[0]
    second, status = capmap.add_entry(first, "Communicator.SIZES", value="[]")
    assert status == "updated"
    assert second == _golden("values_override")
    assert capmap.remove_entry(second, "Communicator.SIZES") == (CLASS_ANNOTATED, "removed")


@pytest.mark.parametrize("source", [
    ONE_LINE.replace("10: [6, 8]}", "10: [6, 8], 12: [8]}"),
    NO_TRAILING_COMMA.replace("10: [6, 8]  # SM100", "10: [6, 8],  # SM100\n    12: [8]"),
], ids=["one_line", "multi_line"])
def test_upstream_entry_is_never_touched(source):
    assert capmap.add_entry(source, "LIMITS") == (source, "present upstream")
    assert capmap.remove_entry(source, "LIMITS") == (source, "present upstream")
    assert capmap.add_entry(source, "LIMITS", value="[]") == (source, "present upstream")


def test_hand_edited_own_entry_is_refused_not_guessed():
    after = capmap.add_entry(NO_TRAILING_COMMA, "LIMITS")[0]
    # Someone moved the comma this module added after the 10 entry to the start of its line.
    edited = after.replace("[6, 8],  # SM100\n    12", "[6, 8]  # SM100\n    , 12")
    compile(edited, "x.py", "exec")
    with pytest.raises(capmap.CapmapError) as err:
        capmap.remove_entry(edited, "LIMITS", label="x.py")
    assert str(err.value) == ("the 12 entry of LIMITS in x.py carries this module's marker but "
                              "was edited since; remove it by hand")
    assert edited != NO_TRAILING_COMMA


@pytest.mark.parametrize("source, name, message", [
    ("LIMITS = {9: [4]}\n", "LIMITS",
     "LIMITS in m.py has no entry for compute capability 10 to copy for 12 (keys: 9)"),
    ("LIMITS = {9: [4],\n    10: [6, 8],\n", "LIMITS",
     "cannot parse m.py: '{' was never closed (line 1)"),
    ("def f(:\n    pass\nLIMITS = {10: [1]}\n", "LIMITS",
     "cannot parse m.py: invalid syntax (line 1)"),
    ("OTHER = {10: [1]}\n", "LIMITS",
     "LIMITS not found in m.py: no assignment to LIMITS at module level"),
    ("LIMITS = dict(a=1)\n", "LIMITS", "LIMITS in m.py (line 1) is not a dict literal"),
    ("LIMITS = {10: 1}\nLIMITS = {10: 2}\n", "LIMITS",
     "LIMITS in m.py is ambiguous: assigned 2 times at module level (lines 1, 2)"),
    ("class C:\n    X = {10: 1}\n", "D.X", "D.X not found in m.py: no class D"),
    ("class C:\n    Y = {10: 1}\n", "C.X",
     "C.X not found in m.py: no assignment to X at class level"),
    ("LIMITS = {}\n", "LIMITS",
     "LIMITS in m.py is an empty dict; there is no entry to place 12 beside"),
    ("LIMITS = {10: 1, **BASE}\n", "LIMITS",
     "LIMITS in m.py ends with a ** unpacking; add 12 by hand"),
    ("LIMITS = {9: 1, 10: 2}; NOTE = 'x'\n", "LIMITS",
     "cannot add 12 to LIMITS in m.py: the line it belongs on (line 1) goes on with a string "
     "or a continuation; add it by hand"),
    ("LIMITS = {10: 1}\n", "LIMITS[0]", "target name 'LIMITS[0]' is not NAME or CLASS.NAME"),
])
def test_bad_source_fails_with_specific_message(source, name, message):
    with pytest.raises(capmap.CapmapError) as err:
        capmap.add_entry(source, name, label="m.py")
    assert str(err.value) == message


@pytest.mark.parametrize("value, rendered", [
    ([], "[]"), ([4, 6, 8], "[4, 6, 8]"), (0, "0"), (None, "None"), (True, "True"),
    ("  64 * MiB ", "64 * MiB"), ("{2: 64 * MiB}", "{2: 64 * MiB}"),
])
def test_render_value(value, rendered):
    assert capmap.render_value(value) == rendered


def test_add_entry_validates_its_value():
    with pytest.raises(capmap.CapmapError) as err:
        capmap.add_entry(ONE_LINE, "LIMITS", value="[6, 8")
    assert str(err.value) == "value '[6, 8' is not a Python expression: '[' was never closed"
    assert capmap.add_entry(ONE_LINE, "LIMITS", value=[8])[0].startswith(
        "LIMITS = {9: [4, 6, 8], 10: [6, 8], 12: [8]}  # added by")


@pytest.mark.parametrize("value, message", [
    ({"2": 1}, "value {'2': 1} is a mapping; give it as a Python expression string, "
               "e.g. '{2: 64 * MiB}'"),
    ("[1,\n2]", "value '[1,\\n2]' spans several lines; give it on one line"),
    ("[1, 2", "value '[1, 2' is not a Python expression: '[' was never closed"),
    ([object], "value [<class 'object'>] is not a list, number, boolean, null or string"),
])
def test_render_value_rejects(value, message):
    with pytest.raises(capmap.CapmapError) as err:
        capmap.render_value(value)
    assert str(err.value) == message


def test_core_is_python38_syntax_and_stdlib_only():
    """Managed nodes may run Python 3.8: the core must parse as 3.8 and import nothing else."""
    path = ROOT / "plugins" / "module_utils" / "capmap.py"
    tree = ast.parse(path.read_text(encoding="utf-8"), feature_version=(3, 8))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            imported.add(node.module.split(".")[0])
    assert imported == {"__future__", "ast", "glob", "os", "re", "tempfile"}


def test_checks_used_here_can_fail():
    assert not insertions_only("10: [6, 8]", "10: [6, 8")
    assert not insertions_only("ab", "ba")
    assert insertions_only("ab", "a, 12b")
    assert evaluate("K = 2\nX = {1: K * 3, 2: [K, -K]}\n", "X") == {1: 6, 2: [2, -2]}
