"""Build the server arguments a release resolves, derives or draws itself, mined with `ast`
from its argument resolution (SGLang is never imported).

A `server_args=ServerArgs(...)` record prints every argument after resolution: the random
seed SGLang drew, the tokenizer path it copied from the model path, the backends, sizes and
ports it chose, a model's defaults set by a hook. A command rebuilt from that record holds
only what the user could have typed, so these fields are left out of it. A field is derived
when the release's resolution code assigns it: ServerArgs' `self.F = ...` in server_args.py
(`__post_init__` and the methods it runs), `server_args.F = ...` or a resolving view's
`cfg.F = ...` in arg_groups/ (0.5.19+ hooks), `declare_resolution(..., F=...)`, a model
override's returned `{"F": value}`. Whether the user typed the value too cannot be told from
the record, so a field SGLang may set is never rebuilt.

    .venv/bin/python -m analyzer.sglang.derived_fields_build --python .sglang/venv/bin/python
    .venv/bin/python -m analyzer.sglang.derived_fields_build --package-dir .sglang/releases/0.5.13/sglang
"""

from __future__ import annotations

import ast
import json
import os
import warnings
from pathlib import Path
from typing import Any

from analyzer.core.output import write_output
from analyzer.sglang.code_paths_build import SERVER_ARGS_FILES
from analyzer.sglang.release_source import SourceMiner, package_version
from analyzer.sglang.source_guards import (
    RESOLUTION_CALLS,
    Guards,
    argument_fields,
    call_name,
    local_holders,
)

HOW = (
    "built by `loganalyze catalog build` (analyzer/sglang/derived_fields_build.py) with ast "
    "from the release's argument resolution: the server arguments SGLang itself assigns"
)
PREFIX, SUFFIX = "derived-", ".json"
# a model override (arg_groups/model_overrides/) returns the fields it sets as a dict
OVERRIDES = "srt/arg_groups/model_overrides/"


def _parse(path: Path) -> ast.Module | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (SyntaxError, UnicodeDecodeError, ValueError):
        return None


def assigned_in(tree: ast.Module, rel: str, default_of: dict[str, Any]) -> dict[str, int]:
    """Each server argument the file may give a value of SGLang's own, with the first line
    that does. Not one it only rewrites (the value read from the field itself, or set under
    a test that the field is set) nor one it only resets to its default."""
    dests = frozenset(default_of)
    guards = Guards(dests, rel.startswith(SERVER_ARGS_FILES))
    found: dict[str, int] = {}
    functions = [
        n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]
    for function in functions:
        holders = local_holders(function)
        tests = _enclosing_tests(function)

        def note(
            field: str | None,
            node: ast.AST,
            value: ast.expr | None = None,
            holders: set[str] = holders,
            tests=tests,
        ) -> None:
            # rewriting a value the user gave (`if cfg.F == "NEXTN": cfg.F = "EAGLE"`,
            # `F=alias(cfg.F)`) keeps it the user's; resetting F to its default gives none
            if field not in dests or field in found:
                return
            default = default_of[field]
            if any(_pins_default(t, field, holders, guards, default) for t in tests(node)):
                found[field] = node.lineno  # type: ignore[attr-defined]
                return  # filled in where the user left the default, whatever it reads
            if value is not None and (
                _reads(value, field, holders, guards) or _is_default(value, default_of[field])
            ):
                return
            if not any(_requires_set(t, field, holders, guards, default) for t in tests(node)):
                found[field] = node.lineno  # type: ignore[attr-defined]

        spread = _spread_names(function)
        for node in ast.walk(function):
            if isinstance(node, ast.Call) and call_name(node.func) in RESOLUTION_CALLS:
                for keyword in node.keywords:
                    note(keyword.arg, node, keyword.value)
            elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
                # `fields = {"F": v}` later spread into declare_resolution(**fields)
                if any(isinstance(t, ast.Name) and t.id in spread for t in node.targets):
                    for key, value in zip(node.value.keys, node.value.values, strict=True):
                        if isinstance(key, ast.Constant) and isinstance(key.value, str):
                            note(key.value, node, value)
            elif isinstance(node, ast.Call) and call_name(node.func) == "setattr":
                key = node.args[1] if len(node.args) > 1 else None
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    note(key.value, node, node.args[2] if len(node.args) > 2 else None)
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    key = _spread_key(target, spread)  # `fields["F"] = v`, spread likewise
                    if key is not None:
                        note(key, node, node.value if isinstance(node, ast.Assign) else None)
                    for part in ast.walk(target):  # `a.x, a.y = ...` too
                        if isinstance(part, ast.Attribute) and _holds(part.value, holders, guards):
                            value = node.value if isinstance(node, ast.Assign) else None
                            note(part.attr, node, value)
            elif isinstance(node, ast.Return) and rel.startswith(OVERRIDES):
                if isinstance(node.value, ast.Dict):
                    for key, value in zip(node.value.keys, node.value.values, strict=True):
                        if isinstance(key, ast.Constant) and isinstance(key.value, str):
                            note(key.value, node, value)
    return found


def _spread_names(function: ast.AST) -> set[str]:
    """Names a function spreads into SGLang's resolution call: `declare_resolution(**x)`."""
    return {
        keyword.value.id
        for node in ast.walk(function)
        if isinstance(node, ast.Call) and call_name(node.func) in RESOLUTION_CALLS
        for keyword in node.keywords
        if keyword.arg is None and isinstance(keyword.value, ast.Name)
    }


def _spread_key(target: ast.expr, spread: set[str]) -> str | None:
    if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
        key = target.slice
        if target.value.id in spread and isinstance(key, ast.Constant):
            return key.value if isinstance(key.value, str) else None
    return None


def resolvable_fields(tree: ast.Module) -> dict[str, int]:
    """0.5.19+ field declarations marked `Arg(..., resolvable=True)`: SGLang resolves them."""
    found: dict[str, int] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        for call in ast.walk(node.annotation):
            if isinstance(call, ast.Call) and call_name(call.func) == "Arg":
                marked = any(
                    k.arg == "resolvable"
                    and isinstance(k.value, ast.Constant)
                    and k.value.value is True
                    for k in call.keywords
                )
                if marked:
                    found.setdefault(node.target.id, node.lineno)
    return found


def _reads(value: ast.expr, field: str, holders: set[str], guards: Guards) -> bool:
    return any(
        isinstance(n, ast.Attribute) and n.attr == field and _holds(n.value, holders, guards)
        for n in ast.walk(value)
    )


def _is_default(value: ast.expr, default: Any) -> bool:
    try:
        return ast.literal_eval(value) == default
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False


def _enclosing_tests(function: ast.AST):
    """For a node of `function`: the tests of the `if`s whose body (not else) holds it."""
    parent_test: dict[int, list[ast.expr]] = {}

    def walk(node: ast.AST, tests: list[ast.expr]) -> None:
        for name, value in ast.iter_fields(node):
            children = value if isinstance(value, list) else [value]
            inner = [*tests, node.test] if isinstance(node, ast.If) and name == "body" else tests
            for child in children:
                if isinstance(child, ast.AST):
                    parent_test[id(child)] = inner
                    walk(child, inner)

    walk(function, [])
    return lambda node: parent_test.get(id(node), [])


def _requires_set(
    test: ast.expr, field: str, holders: set[str], guards: Guards, default: Any = None
) -> bool:
    """Whether `test` holds only when `field` has a value of the user's (truthy, not None,
    equal to or in constants that are not its default): every part of an `and`, one part
    suffices."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return any(_requires_set(v, field, holders, guards, default) for v in test.values)
    if isinstance(test, ast.Attribute):
        return test.attr == field and _holds(test.value, holders, guards)
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        left, op, right = test.left, test.ops[0], test.comparators[0]
        if not (isinstance(left, ast.Attribute) and left.attr == field):
            return False
        if not _holds(left.value, holders, guards):
            return False
        if isinstance(op, ast.IsNot) and isinstance(right, ast.Constant) and right.value is None:
            return True
        if isinstance(right, ast.Constant) and right.value in (None, False):
            return False
        constant = isinstance(right, (ast.Constant, ast.Tuple, ast.List, ast.Set))
        if not (isinstance(op, (ast.Eq, ast.In)) and constant):
            return False
        values = [right] if isinstance(right, ast.Constant) else right.elts  # type: ignore[attr-defined]
        # `F == "auto"` with "auto" its default: SGLang filling in the default, not a rewrite
        return not any(_is_default(v, default) for v in values)
    return False


def _pins_default(
    test: ast.expr, field: str, holders: set[str], guards: Guards, default: Any
) -> bool:
    """Whether `test` holds only while `field` still has its default (`F is None`,
    `F == "auto"`): every part of an `and`, one part suffices."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return any(_pins_default(v, field, holders, guards, default) for v in test.values)
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        left, op, right = test.left, test.ops[0], test.comparators[0]
        if not (isinstance(left, ast.Attribute) and left.attr == field):
            return False
        pinned = isinstance(op, (ast.Eq, ast.Is)) and _is_default(right, default)
        return pinned and _holds(left.value, holders, guards)
    return False


def _holds(base: ast.expr, holders: set[str], guards: Guards) -> bool:
    if isinstance(base, ast.Name) and (base.id in holders or base.id == "server_args"):
        return True
    if isinstance(base, ast.Name) and base.id == "self":
        return guards.self_is_args
    return isinstance(base, ast.Attribute) and base.attr == "server_args"


def build_derived_fields(package: Path, flag_catalog: dict[str, Any]) -> dict[str, Any]:
    """The derived fields of the release at `package`: field -> its flag and where it is set."""
    long_of, default_of = argument_fields(flag_catalog)
    fields: dict[str, dict[str, str]] = {}
    roots = [package / "srt" / "server_args.py", package / "srt" / "arg_groups"]
    files = [roots[0], *sorted(roots[1].rglob("*.py"))] if roots[1].is_dir() else roots[:1]
    for path in files:
        tree = _parse(path) if path.is_file() else None
        if tree is None:
            continue
        rel = path.relative_to(package).as_posix()
        marked = {f: n for f, n in resolvable_fields(tree).items() if f in long_of}
        for field, line in {**marked, **assigned_in(tree, rel, default_of)}.items():
            fields.setdefault(field, {"flag": long_of[field], "site": f"sglang/{rel}:{line}"})
    return {
        "sglang_version": flag_catalog.get("sglang_version") or package_version(package),
        "how": HOW,
        "fields": dict(sorted(fields.items())),
    }


def write_derived_fields(
    path: str | os.PathLike[str], package: Path, flag_catalog: dict[str, Any]
) -> int:
    """Write the derived-fields list; returns how many fields it lists."""
    data = build_derived_fields(package, flag_catalog)
    text = json.dumps(data, sort_keys=True, ensure_ascii=False, indent=1) + "\n"
    write_output(Path(path), text, [])
    return len(data["fields"])


MINER = SourceMiner(
    "analyzer.sglang.derived_fields_build",
    "Mine the server arguments SGLang resolves, derives or draws itself (JSON).",
    PREFIX,
    "derived fields",
    write_derived_fields,
)
write_beside = MINER.write_beside


if __name__ == "__main__":
    raise SystemExit(MINER.main())
