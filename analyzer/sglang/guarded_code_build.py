"""Build SGLang's flag-guarded code: the classes and functions a release runs only when a
server argument is set, mined from its source with `ast` (SGLang is never imported).

A runtime traceback rarely names a flag, but its frames often run through code that exists
in the process only because of one: the scheduler builds `HiRadixCache` only inside `if
self.enable_hierarchical_cache:`, so a crash in its host memory pool says the hierarchical
cache was on. For every module-level class and function of `sglang/srt`, each place that
uses it (calls or constructs it, subclasses it, passes it on; not an annotation nor an
`isinstance` test) is read with the guards that lead there (sglang/source_guards.py: if-tests,
their else branches negated, early exits). A use inside another class or function inherits
that one's guards, so the host pool is guarded through `HiRadixCache`. A name is guarded when
every use of it is: its requirement is the alternatives its uses give (at most
MAX_ALTERNATIVES), each a set of facts only a set flag satisfies (the default cannot, as in
flag_lines_build.py). A name never used in `sglang/srt` (an entry point, a registered
backend) is not guarded; the package's own test files are not read for uses. The map lists each function of a file that runs only under such a
requirement: a method through its class, a nested function through its outer one.

    .venv/bin/python -m analyzer.sglang.guarded_code_build --python .sglang/venv/bin/python
    .venv/bin/python -m analyzer.sglang.guarded_code_build --package-dir .sglang/releases/0.5.13/sglang
"""

from __future__ import annotations

import ast
import os
import re
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analyzer.core.output import write_output
from analyzer.sglang.code_paths_build import SERVER_ARGS_FILES, dumps
from analyzer.sglang.release_source import SourceMiner, package_version
from analyzer.sglang.source_guards import (
    Fact,
    Guards,
    argument_fields,
    call_name,
    direct_copies,
    evidence_test,
    local_copies,
    local_holders,
    resolved_values,
)

HOW = (
    "built by `loganalyze catalog build` (analyzer/sglang/guarded_code_build.py) with ast from "
    "the release's source: functions that run only when a server argument is set"
)
PREFIX, SUFFIX = "guarded-", ".json"
MINED = "srt/**/*.py"
EXITS = (ast.Return, ast.Raise, ast.Continue, ast.Break)
TYPE_TESTS = frozenset({"isinstance", "issubclass"})
MAX_ALTERNATIVES = 4
# tests shipped inside the package: a server never runs them, their uses say nothing
TEST_FILE = re.compile(r"(?:^|/)(?:tests?/|test_[^/]*\.py$|[^/]*_test\.py$)")
MAX_ROUNDS = 30


@dataclass(frozen=True)
class Use:
    """A use of class or function `name` inside `owner` (None: module level), under `facts`."""

    name: str
    owner: str | None
    facts: frozenset[Fact]
    site: str


# one way a name comes to run: the facts it needs, and the use whose guard gives them
Alternative = tuple[frozenset[Fact], str]


class _UseWalker:
    """The uses of known names in one body, with the facts its guards give."""

    def __init__(self, guards: Guards, rel: str, names: frozenset[str]) -> None:
        self.guards = guards
        self.rel = rel
        self.names = names
        self.owner: str | None = None
        self.found: list[Use] = []

    def block(self, body: list[ast.stmt], facts: frozenset[Fact]) -> None:
        extra: set[Fact] = set()
        for stmt in body:
            self.statement(stmt, facts | extra)
            if isinstance(stmt, ast.If) and not stmt.orelse and stmt.body:
                if isinstance(stmt.body[-1], EXITS):
                    extra.update(self.guards.facts(stmt.test, False))

    def statement(self, stmt: ast.stmt, facts: frozenset[Fact]) -> None:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return  # runs when called: walked on its own
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            return
        for node in _own_expressions(stmt):
            self.expression(node, facts)
        if isinstance(stmt, ast.If):
            self.block(stmt.body, facts | set(self.guards.facts(stmt.test, True)))
            self.block(stmt.orelse, facts | set(self.guards.facts(stmt.test, False)))
            return
        for name in ("body", "orelse", "finalbody"):
            inner = getattr(stmt, name, None)
            if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                self.block(inner, facts)
        for handler in getattr(stmt, "handlers", []):
            self.block(handler.body, facts)
        for case in getattr(stmt, "cases", []):
            self.block(case.body, facts)

    def expression(self, node: ast.AST, facts: frozenset[Fact]) -> None:
        if isinstance(node, ast.IfExp):
            self.expression(node.test, facts)
            self.expression(node.body, facts | set(self.guards.facts(node.test, True)))
            self.expression(node.orelse, facts | set(self.guards.facts(node.test, False)))
            return
        if isinstance(node, ast.Call) and call_name(node.func) in TYPE_TESTS:
            for arg in node.args[:1]:
                self.expression(arg, facts)
            return
        if isinstance(node, ast.Lambda):
            return self.expression(node.body, facts)
        name = None
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            name = node.id
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
            name = node.attr
        if name in self.names:
            self.found.append(Use(name, self.owner, facts, f"{self.rel}:{node.lineno}"))
        for child in ast.iter_child_nodes(node):
            self.expression(child, facts)


def _own_expressions(stmt: ast.stmt) -> Iterator[ast.AST]:
    """The expressions of a statement outside its nested blocks, annotations left out."""
    for name, value in ast.iter_fields(stmt):
        if name in ("body", "orelse", "finalbody", "handlers", "cases", "annotation"):
            continue
        if isinstance(value, ast.AST):
            yield value
        elif isinstance(value, list):
            yield from (v for v in value if isinstance(v, ast.AST))


def _parse(path: Path) -> ast.Module | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (SyntaxError, UnicodeDecodeError, ValueError):
        return None


def defined_names(tree: ast.Module) -> set[str]:
    """The module-level classes and functions of a file."""
    kinds = (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    return {node.name for node in tree.body if isinstance(node, kinds)}


def owners_of_functions(tree: ast.Module) -> dict[str, set[str]]:
    """Function name -> the module-level classes / functions it belongs to in this file."""
    owners: dict[str, set[str]] = {}
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            for inner in ast.walk(node):
                if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    owners.setdefault(inner.name, set()).add(node.name)
    return owners


def mine_uses(
    tree: ast.Module,
    rel: str,
    dests: frozenset[str],
    names: frozenset[str],
    resolved: dict[str, list[Any]] | None = None,
) -> list[Use]:
    """Every use of one of `names` in a file, with its guards' facts and its owner."""
    guards = Guards(dests, rel.startswith(SERVER_ARGS_FILES))
    walker = _UseWalker(guards, rel, names)
    if resolved is not None:
        for field, values in resolved_values(tree, guards).items():
            resolved.setdefault(field, []).extend(values)

    def visit(function: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for node in ast.walk(function):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                guards.holders = local_holders(node)
                guards.locals = local_copies(node, guards)
                for decorator in node.decorator_list:
                    walker.expression(decorator, frozenset())
                walker.block(node.body, frozenset())
        guards.holders, guards.locals = set(), {}

    walker.block(tree.body, frozenset())  # module-level statements: owner None
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            walker.owner = node.name
            for base in node.bases:
                walker.expression(base, frozenset())
            guards.copies = direct_copies(node, guards)
            walker.block(node.body, frozenset())  # class attributes
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    visit(item)
            guards.copies = {}
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            walker.owner = node.name
            visit(node)
        walker.owner = None
    return walker.found


def _minimal(alternatives: list[Alternative]) -> list[Alternative] | None:
    """The alternatives without those another one's facts imply (None: one needs nothing)."""
    best: dict[frozenset[Fact], str] = {}
    for facts, site in alternatives:
        if not facts:
            return None
        best[facts] = min(site, best.get(facts, site))
    kept = [(f, s) for f, s in best.items() if not any(o < f for o in best)]
    if len(kept) > MAX_ALTERNATIVES:
        return None
    return sorted(kept, key=lambda item: (sorted(map(repr, item[0])), item[1]))


def requirements(uses: list[Use]) -> dict[str, list[Alternative]]:
    """Name -> the alternatives it runs under, for the guarded names (least fixed point:
    a name used only by itself or in a cycle is not guarded)."""
    by_name: dict[str, list[Use]] = {}
    for use in uses:
        if use.owner != use.name:
            by_name.setdefault(use.name, []).append(use)
    found: dict[str, list[Alternative]] = {}
    for _ in range(MAX_ROUNDS):
        after: dict[str, list[Alternative]] = {}
        for name, sites in by_name.items():
            alternatives: list[Alternative] = []
            for use in sites:
                inherited = found.get(use.owner) if use.owner else None
                if inherited is None:
                    alternatives.append((use.facts, use.site))
                    continue
                for facts, site in inherited:
                    alternatives.append((use.facts | facts, use.site if use.facts else site))
            kept = _minimal(alternatives)
            if kept is not None:
                after[name] = kept
        if after == found:
            break
        found = after
    return found


def build_guarded_code(package: Path, flag_catalog: dict[str, Any]) -> dict[str, Any]:
    """The flag-guarded functions of the release at `package`, flags from its catalog."""
    long_of, default_of = argument_fields(flag_catalog)
    dests = frozenset(long_of)
    trees: dict[str, ast.Module] = {}
    for path in sorted(package.glob(MINED)):
        tree = _parse(path)
        if tree is not None:
            trees[path.relative_to(package).as_posix()] = tree
    names = frozenset(n for tree in trees.values() for n in defined_names(tree))
    resolved: dict[str, list[Any]] = {}
    uses = [
        use
        for rel, tree in trees.items()
        if not TEST_FILE.search(rel)
        for use in mine_uses(tree, rel, dests, names, resolved)
    ]
    is_evidence = evidence_test(default_of, resolved)
    uses = [
        Use(u.name, u.owner, frozenset(f for f in u.facts if is_evidence(f)), u.site)
        for u in uses
    ]
    guarded = requirements(uses)
    files: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for rel, tree in trees.items():
        for function, owners in sorted(owners_of_functions(tree).items()):
            if not all(o in guarded for o in owners):
                continue
            kept = _minimal([a for o in sorted(owners) for a in guarded[o]])
            if kept is not None:
                files.setdefault(rel, {})[function] = [_entry(a, long_of) for a in kept]
    return {
        "sglang_version": package_version(package),
        "flag_catalog": flag_catalog.get("sglang_version"),
        "how": HOW,
        "files": files,
    }


def _entry(alternative: Alternative, long_of: dict[str, str]) -> dict[str, Any]:
    facts, site = alternative
    needs = sorted(
        [long_of[f.field], f.op, list(f.value) if isinstance(f.value, tuple) else f.value]
        for f in facts
    )
    return {"needs": needs, "site": site}


def write_guarded_code(
    path: str | os.PathLike[str], package: Path, flag_catalog: dict[str, Any]
) -> int:
    """Write the guarded-code map; returns how many functions it lists."""
    data = build_guarded_code(package, flag_catalog)
    write_output(Path(path), dumps(data), [])
    return sum(len(functions) for functions in data["files"].values())


MINER = SourceMiner(
    "analyzer.sglang.guarded_code_build",
    "Mine the functions SGLang runs only when a server argument is set (JSON).",
    PREFIX,
    "guarded functions",
    write_guarded_code,
)
write_beside = MINER.write_beside


if __name__ == "__main__":
    raise SystemExit(MINER.main())
