"""Checks shared by the capmap tests, written independently of the core they check.

`evaluate` computes a dict's value from source text without importing it (SGLang needs torch
and a GPU): literals, arithmetic and names bound by the module's own constant assignments,
so `64 * MiB` evaluates to 67108864.
"""
from __future__ import annotations

import ast
import difflib
import operator

_BINOPS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
    ast.Pow: operator.pow, ast.LShift: operator.lshift, ast.RShift: operator.rshift,
    ast.BitOr: operator.or_, ast.BitAnd: operator.and_, ast.BitXor: operator.xor,
}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Invert: operator.invert}


class NotConstant(Exception):
    pass


def _eval(node, names):
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in names:
            raise NotConstant(node.id)
        return names[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        return _BINOPS[type(node.op)](_eval(node.left, names), _eval(node.right, names))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_eval(node.operand, names))
    if isinstance(node, ast.List):
        return [_eval(e, names) for e in node.elts]
    if isinstance(node, ast.Tuple):
        return tuple(_eval(e, names) for e in node.elts)
    if isinstance(node, ast.Dict):
        if None in node.keys:
            raise NotConstant("**")
        return {_eval(k, names): _eval(v, names) for k, v in zip(node.keys, node.values)}
    raise NotConstant(ast.dump(node))


def _constants(body, names):
    for stmt in body:
        targets = stmt.targets if isinstance(stmt, ast.Assign) else (
            [stmt.target] if isinstance(stmt, ast.AnnAssign) and stmt.value else [])
        for target in targets:
            if isinstance(target, ast.Name):
                try:
                    names[target.id] = _eval(stmt.value, names)
                except NotConstant:
                    pass
    return names


def evaluate(source: str, dotted: str):
    """The value of module-level NAME or class-level CLASS.NAME in `source`."""
    tree = ast.parse(source)
    names = _constants(tree.body, {})
    body = tree.body
    *classes, attr = dotted.split(".")
    for cls in classes:
        (node,) = [s for s in body if isinstance(s, ast.ClassDef) and s.name == cls]
        body = node.body
        names = _constants(body, dict(names))
    assert attr in names, f"{dotted} not evaluable"
    return names[attr]


def insertions_only(before: str, after: str) -> bool:
    """True when `after` is `before` with text inserted and nothing replaced or deleted.

    That is: `before` is a subsequence of `after` (a greedy scan decides it exactly).
    """
    rest = iter(after)
    return all(char in rest for char in before)


def line_insertions_only(before: str, after: str) -> bool:
    """True when whole lines were inserted and no existing line changed."""
    matcher = difflib.SequenceMatcher(
        None, before.splitlines(keepends=True), after.splitlines(keepends=True), autojunk=False)
    return all(tag in ("equal", "insert") for tag, *dummy in matcher.get_opcodes())
