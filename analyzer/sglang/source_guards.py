"""The guards of SGLang's source: what an if-test (or an early exit) makes certain of the
server arguments, read with `ast` (sglang/flag_lines_build.py mines the log calls they guard).

A guard says a server argument F is truthy, falsy, None, not None, equal to / among
constants, or compared with a number. F is read through a holder of server arguments (as
code_paths_build.py reads them), `self.F` in ServerArgs' own code, a view of them
(`cfg = resolving_view(server_args)`), or a copy (`self.a = server_args.F`, `a =
server_args.F`). `resolved_values` gives the values SGLang assigns a setting itself.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from analyzer.sglang.code_paths_build import _is_holder

# 0.5.19+ argument resolution: `cfg = resolving_view(server_args)` holds the arguments, and
# `declare_resolution(server_args, source, F=value)` is SGLang choosing F's value itself
VIEW_CALLS = frozenset({"resolving_view"})
RESOLUTION_CALLS = frozenset({"declare_resolution"})


@dataclass(frozen=True)
class Fact:
    """What a guard requires of server argument `field`: op in truthy, falsy, none, not_none,
    eq, ne, in, not_in, gt, ge, lt, le (value: the constant compared with)."""

    field: str
    op: str
    value: Any = None

    def holds_for(self, default: Any) -> bool | None:
        """Whether the default satisfies it (None: cannot tell)."""
        try:
            return {
                "truthy": lambda: bool(default),
                "falsy": lambda: not default,
                "none": lambda: default is None,
                "not_none": lambda: default is not None,
                "eq": lambda: default == self.value,
                "ne": lambda: default != self.value,
                "in": lambda: default in self.value,
                "not_in": lambda: default not in self.value,
                "gt": lambda: default is not None and default > self.value,
                "ge": lambda: default is not None and default >= self.value,
                "lt": lambda: default is not None and default < self.value,
                "le": lambda: default is not None and default <= self.value,
            }[self.op]()
        except (TypeError, KeyError):
            return None


FLIP = {"truthy": "falsy", "falsy": "truthy", "none": "not_none", "not_none": "none",
        "eq": "ne", "ne": "eq", "in": "not_in", "not_in": "in",
        "gt": "le", "le": "gt", "lt": "ge", "ge": "lt"}  # fmt: skip
COMPARE = {ast.Eq: "eq", ast.NotEq: "ne", ast.In: "in", ast.NotIn: "not_in",
           ast.Gt: "gt", ast.GtE: "ge", ast.Lt: "lt", ast.LtE: "le"}  # fmt: skip
ORDER = frozenset({"gt", "ge", "lt", "le"})
MIRROR = {"gt": "lt", "lt": "gt", "ge": "le", "le": "ge", "eq": "eq", "ne": "ne"}


class Guards:
    """Reads the facts of one file's guards."""

    def __init__(self, dests: frozenset[str], self_is_args: bool) -> None:
        self.dests = dests
        self.self_is_args = self_is_args
        self.copies: dict[str, str] = {}  # `self.a = server_args.F` in the current class
        self.locals: dict[str, str] = {}  # `a = server_args.F` in the current function
        self.holders: set[str] = set()  # `cfg = resolving_view(server_args)`, `sa = server_args`

    def field(self, node: ast.expr) -> str | None:
        """The server argument `node` reads directly, if it is one."""
        if isinstance(node, ast.Attribute):
            base = node.value
            on_self = isinstance(base, ast.Name) and base.id == "self"
            held = _is_holder(base) or (isinstance(base, ast.Name) and base.id in self.holders)
            if node.attr in self.dests and (held or (on_self and self.self_is_args)):
                return node.attr
            if on_self:
                return self.copies.get(node.attr)
            return None
        if isinstance(node, ast.Name):
            return self.locals.get(node.id)
        if isinstance(node, ast.Subscript) and _is_holder(node.value):
            key = node.slice
            if isinstance(key, ast.Constant) and key.value in self.dests:
                return key.value
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id == "getattr" and len(node.args) >= 2 and _is_holder(node.args[0]):
                key = node.args[1]
                if isinstance(key, ast.Constant) and key.value in self.dests:
                    return key.value
        return None

    def facts(self, test: ast.expr, want: bool) -> list[Fact]:
        """The facts certain when `test` evaluates to `want`."""
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            return self.facts(test.operand, not want)
        if isinstance(test, ast.BoolOp):
            conjunctive = isinstance(test.op, ast.And) == want
            if not conjunctive:
                return []
            return [f for value in test.values for f in self.facts(value, want)]
        field = self.field(test)
        if field is not None:
            return [Fact(field, "truthy" if want else "falsy")]
        if isinstance(test, ast.Compare) and len(test.ops) == 1:
            return self._compare(test, want)
        return []

    def _compare(self, test: ast.Compare, want: bool) -> list[Fact]:
        op, left, right = test.ops[0], test.left, test.comparators[0]
        if isinstance(op, (ast.Is, ast.IsNot)):
            field = self.field(left) or self.field(right)
            other = right if self.field(left) else left
            if field is None or not (isinstance(other, ast.Constant) and other.value is None):
                return []
            name = "none" if isinstance(op, ast.Is) else "not_none"
            return [Fact(field, name if want else FLIP[name])]
        name = COMPARE.get(type(op))
        if name is None:
            return []
        field, other = self.field(left), right
        if field is None and name in MIRROR:
            field, other, name = self.field(right), left, MIRROR[name]
        if field is None:
            return []
        try:
            value = ast.literal_eval(other)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return []
        if name in ("in", "not_in"):
            if not isinstance(value, (tuple, list, set, frozenset)):
                return []
            value = tuple(sorted(value, key=repr))
        elif isinstance(value, (list, set, dict)):
            return []
        return [Fact(field, name if want else FLIP[name], value)]


def direct_copies(cls: ast.ClassDef, guards: Guards) -> dict[str, str]:
    """`self.a = <holder>.F` in the class's methods, for names assigned only so."""
    copies: dict[str, str | None] = {}
    for node in ast.walk(cls):
        if not isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            if not (
                isinstance(target, ast.Attribute)
                and isinstance(target.value, ast.Name)
                and target.value.id == "self"
            ):
                continue
            value = node.value if not isinstance(node, ast.AugAssign) else None
            field = guards.field(value) if value is not None and len(targets) == 1 else None
            previous = copies.get(target.attr, field)
            copies[target.attr] = field if previous == field else None
    return {name: field for name, field in copies.items() if field is not None}


def local_copies(function: ast.AST, guards: Guards) -> dict[str, str]:
    """`a = <holder>.F` in a function, for names assigned only once."""
    assigned: dict[str, list[ast.expr | None]] = {}
    for node in ast.walk(function):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        value = node.value if target is name and len(node.targets) == 1 else None
                        assigned.setdefault(name.id, []).append(value)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.NamedExpr)):
            target = node.target
            for name in ast.walk(target):
                if isinstance(name, ast.Name):
                    assigned.setdefault(name.id, []).append(None)
    copies = {}
    for name, values in assigned.items():
        if len(values) == 1 and values[0] is not None:
            field = guards.field(values[0])
            if field is not None:
                copies[name] = field
    return copies


def local_holders(function: ast.AST) -> set[str]:
    """Names a function gives the server arguments: `sa = self.server_args`, `cfg =
    resolving_view(server_args)`."""
    found = set()
    for node in ast.walk(function):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
            view = isinstance(value, ast.Call) and call_name(value.func) in VIEW_CALLS
            if isinstance(target, ast.Name) and (_is_holder(value) or view):
                found.add(target.id)
    return found


def call_name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else None


def assigned_fields(body: list[ast.stmt], guards: Guards) -> set[str]:
    """Server arguments a block assigns (`server_args.F = ...`, ServerArgs' `self.F = ...`)."""
    found = set()
    for stmt in body:
        for node in ast.walk(stmt):
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                targets = [node.target]
            elif isinstance(node, ast.Call) and call_name(node.func) in RESOLUTION_CALLS:
                found.update(k.arg for k in node.keywords if k.arg in guards.dests)
            for target in targets:
                if isinstance(target, ast.Attribute) and target.attr in guards.dests:
                    found.add(target.attr)
    return found


UNKNOWN = object()  # an assigned value that is not a constant


def resolved_values(tree: ast.AST, guards: Guards) -> dict[str, list[Any]]:
    """The values SGLang itself assigns to server arguments (`server_args.F = v`, ServerArgs'
    `self.F = v`): a constant, or UNKNOWN."""
    found: dict[str, list[Any]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and call_name(node.func) in RESOLUTION_CALLS:
            for keyword in node.keywords:
                if keyword.arg in guards.dests:
                    found.setdefault(keyword.arg, []).append(_constant(keyword.value))
            continue
        if not isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) or node.value is None:
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            if not isinstance(target, ast.Attribute) or target.attr not in guards.dests:
                continue
            base = target.value
            on_self = isinstance(base, ast.Name) and base.id == "self"
            if not (_is_holder(base) or (on_self and guards.self_is_args)):
                continue
            value = UNKNOWN if isinstance(node, ast.AugAssign) else _constant(node.value)
            found.setdefault(target.attr, []).append(value)
    return found


def _constant(node: ast.expr) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return UNKNOWN


def argument_fields(flag_catalog: dict[str, Any]) -> tuple[dict[str, str], dict[str, Any]]:
    """Server-argument field -> its long option, and -> its default, from a flag catalog."""
    long_of: dict[str, str] = {}
    default_of: dict[str, Any] = {}
    for option in flag_catalog["options"]:
        strings = option["option_strings"]
        if option["dest"] not in long_of:
            long_of[option["dest"]] = next((s for s in strings if s.startswith("--")), strings[0])
            default_of[option["dest"]] = option.get("default")
    return long_of, default_of


def evidence_test(
    default_of: dict[str, Any], resolved: dict[str, list[Any]]
) -> Callable[[Fact], bool]:
    """Whether a fact is evidence of its flag being set: the default cannot satisfy it, nor
    (but for an opt-in switch, default False) a value SGLang assigns the setting itself; an
    order comparison of a setting whose default is None is none (`page_size <= 1`: SGLang
    fills the None, and the value it picks is not always an assignment read here)."""

    def is_evidence(fact: Fact) -> bool:
        default = default_of[fact.field]
        if fact.holds_for(default) is not False:
            return False
        if default is None and fact.op in ORDER:
            return False  # a None default is SGLang's to fill: its value compares either way
        if isinstance(default, bool):
            return True
        values = resolved.get(fact.field, [])
        return all(v is not UNKNOWN and fact.holds_for(v) is False for v in values)

    return is_evidence
