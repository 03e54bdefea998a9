"""Build SGLang's error catalog: every raise / assert / log-and-exit site on its startup and
model-loading path, mined from the release's own source with `ast`.

Many SGLang startup errors never spell a flag (`Currently standalone speculative decoding
does not support dp attention.`, a bare `assert`), so the log alone cannot say which flag
is at fault. The source can: the `if` that guards the raise reads `self.enable_dp_attention`,
and the flag catalog maps that ServerArgs field to `--enable-dp-attention`. This module
records, per site, the message as a matcher and the server arguments the guard and the
message read. SGLang is never imported: only its files are parsed, so any release can be
mined from a `pip install --target` folder, by any Python.

    .venv/bin/python -m analyzer.sglang.error_catalog_build --python .sglang/venv/bin/python \
        -o analyzer/catalogs/errors-0.5.23.json
    .venv/bin/python -m analyzer.sglang.error_catalog_build \
        --package-dir .sglang/releases/0.5.13/sglang -o analyzer/catalogs/errors-0.5.13.json
"""

from __future__ import annotations

import ast
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analyzer.core.output import write_output
from analyzer.sglang.error_source import (
    Template,
    child_blocks,
    exits,
    exprs,
    is_log_error,
    is_self,
    target_names,
    template_of,
    walk_body,
)
from analyzer.sglang.release_source import SourceMiner, package_version

HOW = (
    "built by `loganalyze catalog build` (analyzer/sglang/error_catalog_build.py) with ast from the "
    "release's source; flags mapped through the same release's flag catalog"
)
# The startup and model-loading path: argument resolution, model config, weight loading,
# memory pools, CUDA graphs, distributed init.
MINED_FILES = (
    "srt/server_args.py",
    "srt/server_args_config_parser.py",
    "srt/arg_groups/**/*.py",
    "srt/speculative/**/*.py",
    "srt/configs/**/*.py",
    "srt/model_loader/**/*.py",
    "srt/model_executor/model_runner.py",
    "srt/model_executor/model_runner_components/*.py",
    "srt/model_executor/pool_configurator.py",
    "srt/model_executor/*cuda_graph_runner.py",
    "srt/model_executor/runner/*cuda_graph_runner.py",
    "srt/model_executor/cuda_graph_config.py",
    "srt/distributed/parallel_state.py",
)
# Argument resolution proper: what the >= 95% flag-resolution target is measured on.
STARTUP_FILES = ("srt/server_args.py", "srt/arg_groups/", "srt/configs/model_config.py")
# Names that hold a ServerArgs (or a read view of one) by convention: `server_args`
# everywhere; the short ones only where argument resolution runs (in configs/, `cfg` is
# a model's config and `args` anything).
SA_NAMES = frozenset({"server_args"})
SA_SHORT_NAMES = frozenset({"args", "cfg", "view", "sa"})
SA_SHORT_FILES = ("srt/server_args.py", "srt/server_args_config_parser.py", "srt/arg_groups/")
# Calls that return a ServerArgs or a view over it.
SA_FACTORIES = frozenset(
    {"resolving_view", "resolved_view", "ResolvedView", "ResolvingConfig", "get_global_server_args"}
)
SA_CLASSES = frozenset({"ServerArgs"})
# A helper (or property) reading more fields than this builds something (a ModelConfig)
# rather than tests one setting: following it would blame every flag it touches.
MAX_HELPER_READS = 8
# Enclosing guards kept as an entry's context, innermost first.
MAX_CONTEXT = 2


class _Module:
    """One parsed source file, with the names it imports from other sglang modules."""

    def __init__(self, package: Path, path: Path) -> None:
        self.path = path
        self.rel = path.relative_to(package).as_posix()
        self.tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        self.functions = {
            n.name: n
            for n in self.tree.body
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
        }
        self.imports: dict[str, tuple[str, str]] = {}
        for node in ast.walk(self.tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    self.imports[alias.asname or alias.name] = (node.module, alias.name)


class _Scope:
    """What one function body knows: which names hold server args, and what locals carry."""

    def __init__(self, sa_names: set[str], self_is_sa: bool, params: set[str]) -> None:
        self.sa_names = set(sa_names) | ({"self"} if self_is_sa else set())
        self.params = params
        self.locals: dict[str, set[str]] = {}
        # the last value a local was given: `msg = f"..."; raise ValueError(msg)`
        self.locals_src: dict[str, ast.expr] = {}
        self.class_attrs: dict[str, set[str]] = {}


def _guard_text(test: ast.expr, negated: bool) -> str:
    text = ast.unparse(test)
    return f"not ({text})" if negated else text


@dataclass(frozen=True)
class _Where:
    """The function being mined, and where its sites go."""

    mod: _Module
    function: str
    scope: _Scope
    sites: list[dict[str, Any]]


class Miner:
    """Mines one installed release. `dests`: the flag catalog's ServerArgs field names."""

    def __init__(self, package: Path, dests: Iterable[str], numbers: Iterable[str] = ()) -> None:
        self.package = package
        self.dests = frozenset(dests)
        self.numbers = frozenset(numbers)
        self._modules: dict[Path, _Module | None] = {}
        self._helper_reads: dict[tuple[str, str, str], set[str]] = {}
        self._members: dict[str, ast.FunctionDef] = {}
        self._member_reads: dict[str, set[str]] = {}
        server_args = self.module(package / "srt" / "server_args.py")
        if server_args is not None:
            for node in server_args.tree.body:
                if isinstance(node, ast.ClassDef) and node.name in SA_CLASSES:
                    for item in node.body:
                        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                            self._members.setdefault(item.name, item)
        self.aliases = self._field_aliases()
        self.dests = self.dests | frozenset(self.aliases)
        self.numbers |= {field for field, dest in self.aliases.items() if dest in self.numbers}

    def _field_aliases(self) -> dict[str, str]:
        """ServerArgs fields named unlike their argparse dest: `args.tp_size =
        args.tensor_parallel_size` in `from_cli_args` (releases before 0.5.19)."""
        func = self._members.get("from_cli_args")
        aliases: dict[str, str] = {}
        for node in walk_body(func) if func is not None else ():
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Attribute):
                for target in node.targets:
                    if isinstance(target, ast.Attribute) and node.value.attr in self.dests:
                        aliases[target.attr] = node.value.attr
        return aliases

    # -- modules and helpers ------------------------------------------------------------
    def module(self, path: Path) -> _Module | None:
        if path not in self._modules:
            try:
                self._modules[path] = _Module(self.package, path)
            except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
                self._modules[path] = None
        return self._modules[path]

    def _module_of(self, dotted: str) -> _Module | None:
        if not dotted.startswith("sglang."):
            return None
        base = self.package.joinpath(*dotted.split(".")[1:])
        for path in (base.with_suffix(".py"), base / "__init__.py"):
            if path.is_file():
                return self.module(path)
        return None

    def _resolve_function(self, mod: _Module, name: str) -> tuple[_Module, ast.AST] | None:
        if name in mod.functions:
            return mod, mod.functions[name]
        if name in mod.imports:
            dotted, original = mod.imports[name]
            other = self._module_of(dotted)
            if other is not None and original in other.functions:
                return other, other.functions[original]
        return None

    def helper_reads(self, mod: _Module, name: str, position: int | str) -> set[str]:
        """Fields a module-level helper reads off the argument at `position` (one level)."""
        found = self._resolve_function(mod, name)
        if found is None:
            return set()
        target_mod, func = found
        params = [a.arg for a in (*func.args.posonlyargs, *func.args.args)]
        if isinstance(position, int):
            if position >= len(params):
                return set()
            param = params[position]
        else:
            param = position
        key = (target_mod.rel, func.name, param)
        if key not in self._helper_reads:
            self._helper_reads[key] = set()  # recursion guard
            scope = self.scope_for(func, target_mod, {param}, self_is_sa=False, depth=1)
            reads = set().union(*(self.reads(n, scope, target_mod, 1) for n in exprs(func)))
            self._helper_reads[key] = reads if len(reads) <= MAX_HELPER_READS else set()
        return self._helper_reads[key]

    def member_reads(self, name: str) -> set[str]:
        """Fields a ServerArgs property or method reads off `self` (one level)."""
        func = self._members.get(name)
        if func is None:
            return set()
        if name not in self._member_reads:
            self._member_reads[name] = set()
            mod = self.module(self.package / "srt" / "server_args.py")
            assert mod is not None
            scope = self.scope_for(func, mod, set(), self_is_sa=True, depth=1)
            reads = set().union(*(self.reads(n, scope, mod, 1) for n in exprs(func)))
            self._member_reads[name] = reads if len(reads) <= MAX_HELPER_READS else set()
        return self._member_reads[name]

    # -- reads --------------------------------------------------------------------------
    def scope_for(
        self, func: ast.AST, mod: _Module, sa_names: set[str], self_is_sa: bool, depth: int
    ) -> _Scope:
        """Server-arg names of one function, and what its local variables were read from."""
        args = func.args  # type: ignore[attr-defined]
        params = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
        names = set(sa_names)
        conventional = SA_NAMES | (SA_SHORT_NAMES if mod.rel.startswith(SA_SHORT_FILES) else set())
        for a in (*args.posonlyargs, *args.args, *args.kwonlyargs):
            if a.arg in conventional or (
                a.annotation is not None and "ServerArgs" in ast.unparse(a.annotation)
            ):
                names.add(a.arg)
        scope = _Scope(names, self_is_sa, params)
        assigns = [
            n for n in walk_body(func) if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign))
        ]
        for node in assigns:  # aliases first: `cfg = resolving_view(server_args)`
            if node.value is not None and self.is_sa(node.value, scope):
                scope.sa_names.update(target_names(node))
        for node in assigns:
            names = target_names(node)
            if len(names) == 1 and node.value is not None:
                previous = scope.locals_src.get(names[0])
                if isinstance(node, ast.AugAssign) and previous is not None:
                    scope.locals_src[names[0]] = ast.BinOp(previous, node.op, node.value)
                elif not isinstance(node, ast.AugAssign):
                    scope.locals_src[names[0]] = node.value
        for _ in range(2):  # locals read from locals
            for node in assigns:
                if node.value is None:
                    continue
                got = self.reads(node.value, scope, mod, depth)
                for name in target_names(node):
                    if name not in scope.sa_names and got:
                        scope.locals.setdefault(name, set()).update(got)
        return scope

    def is_sa(self, node: ast.AST, scope: _Scope) -> bool:
        """An expression that evaluates to the ServerArgs (or a read view of it)."""
        if isinstance(node, ast.Name):
            return node.id in scope.sa_names
        if isinstance(node, ast.Attribute):
            return node.attr in ("server_args", "_server_args")
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            return name in SA_FACTORIES
        return False

    def reads(self, node: ast.AST, scope: _Scope, mod: _Module, depth: int = 0) -> set[str]:
        """ServerArgs attribute names an expression reads, through locals, properties,
        ServerArgs methods and module helpers that take the server args."""
        found: set[str] = set()
        for sub in ast.walk(node):
            if isinstance(sub, ast.Attribute) and isinstance(sub.ctx, ast.Load):
                if self.is_sa(sub.value, scope):
                    found.add(sub.attr)
                    if depth == 0 and sub.attr in self._members:
                        found |= self.member_reads(sub.attr)
                elif is_self(sub.value) and sub.attr in scope.class_attrs:
                    found |= scope.class_attrs[sub.attr]
            elif isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load):
                if sub.id in scope.locals:
                    found |= scope.locals[sub.id]
                elif sub.id in scope.params and sub.id in self.dests:
                    found.add(sub.id)
            elif isinstance(sub, ast.Call):
                found |= self._call_reads(sub, scope, mod, depth)
        return found

    def _call_reads(self, call: ast.Call, scope: _Scope, mod: _Module, depth: int) -> set[str]:
        func = call.func
        if isinstance(func, ast.Name) and func.id in ("getattr", "hasattr") and len(call.args) >= 2:
            target, name = call.args[0], call.args[1]
            if (
                self.is_sa(target, scope)
                and isinstance(name, ast.Constant)
                and isinstance(name.value, str)
            ):
                return {name.value}
            return set()
        if depth > 0 or not isinstance(func, ast.Name):
            return set()
        found: set[str] = set()
        for i, arg in enumerate(call.args):
            if self.is_sa(arg, scope):
                found |= self.helper_reads(mod, func.id, i)
        for kw in call.keywords:
            if kw.arg and self.is_sa(kw.value, scope):
                found |= self.helper_reads(mod, func.id, kw.arg)
        return found

    # -- sites --------------------------------------------------------------------------
    def mine_file(self, mod: _Module) -> list[dict[str, Any]]:
        sites: list[dict[str, Any]] = []
        self._visit_defs(mod.tree.body, mod, [], None, sites)
        return sites

    def _visit_defs(
        self,
        body: list[ast.stmt],
        mod: _Module,
        names: list[str],
        cls: ast.ClassDef | None,
        sites: list[dict[str, Any]],
    ) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                self._visit_defs(node.body, mod, [*names, node.name], node, sites)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                qual = [*names, node.name]
                self_is_sa = cls is not None and (
                    cls.name in SA_CLASSES or "/arg_groups/fields/" in f"/{mod.rel}"
                )
                scope = self.scope_for(node, mod, set(), self_is_sa, depth=0)
                if cls is not None and not self_is_sa:
                    scope.class_attrs = self._class_attrs(cls, mod)
                self._visit_block(_Where(mod, ".".join(qual), scope, sites), node.body, [])
                self._visit_defs(node.body, mod, qual, None, sites)
        # Module-level code (import-time checks) is not on the launch path we care about.

    def _class_attrs(self, cls: ast.ClassDef, mod: _Module) -> dict[str, set[str]]:
        """`self.page_size = server_args.page_size` in any method: self.page_size reads it."""
        attrs: dict[str, set[str]] = {}
        for item in cls.body:
            if not isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            scope = self.scope_for(item, mod, set(), self_is_sa=False, depth=1)
            for node in walk_body(item):
                if isinstance(node, ast.Assign):
                    got = self.reads(node.value, scope, mod, 1)
                    for target in node.targets:
                        if isinstance(target, ast.Attribute) and is_self(target.value) and got:
                            attrs.setdefault(target.attr, set()).update(got)
        return attrs

    def _visit_block(
        self, at: _Where, body: list[ast.stmt], guards: list[tuple[ast.expr, bool]]
    ) -> None:
        """Sites in a block; `guards`: the enclosing `if` tests (True: in the else branch)."""
        for index, node in enumerate(body):
            if isinstance(node, ast.If):
                self._visit_block(at, node.body, [*guards, (node.test, False)])
                self._visit_block(at, node.orelse, [*guards, (node.test, True)])
            elif isinstance(node, ast.Raise):
                self._raise_site(at, node, guards)
            elif isinstance(node, ast.Assert):
                message = self._message(at, node.msg)
                test = [*guards, (node.test, False)]
                self._add(at, node, "assert", "AssertionError", message, test)
            elif isinstance(node, ast.Expr) and is_log_error(node.value):
                if exits(body[index + 1 : index + 3]):
                    call = node.value
                    assert isinstance(call, ast.Call)
                    message = self._message(at, *call.args)
                    self._add(at, node, "log_exit", "SystemExit", message, guards)
            elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                for block in child_blocks(node):
                    self._visit_block(at, block, guards)

    def _message(self, at: _Where, node: ast.expr | None = None, *extra: ast.expr) -> Template:
        if node is None:
            return Template.empty()
        module = "sglang." + at.mod.rel.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
        return template_of(
            node, at.scope.locals_src, extra=extra, numbers=self.numbers, module=module
        )

    def _raise_site(self, at: _Where, node: ast.Raise, guards: list[tuple[ast.expr, bool]]) -> None:
        exc = node.exc
        if exc is None:
            return
        call = exc if isinstance(exc, ast.Call) else None
        target = call.func if call is not None else exc
        name = target.id if isinstance(target, ast.Name) else getattr(target, "attr", None)
        if not name or not (name[0].isupper() or name.endswith(("Error", "Exception"))):
            return  # `raise err`, a re-raised instance: no site of its own
        if name in ("SystemExit", "KeyboardInterrupt", "StopIteration"):
            return  # a command-line tool's exit, control flow
        message = self._message(at, *(call.args[:1] if call is not None else ()))
        self._add(at, node, "raise", name, message, guards)

    def _add(
        self,
        at: _Where,
        node: ast.stmt,
        kind: str,
        exception: str,
        message: Template,
        guards: list[tuple[ast.expr, bool]],
    ) -> None:
        mod, scope = at.mod, at.scope
        condition = ""
        cond_reads: set[str] = set()
        outer = list(reversed(guards))  # nearest first
        used = 0
        for used, (test, negated) in enumerate(outer):  # noqa: B007 - the nearest that reads
            got = self.reads(test, scope, mod)
            if not condition:
                condition = _guard_text(test, negated)
            if got:
                cond_reads = got
                break
        # The guards around that one: `if cfg.speculative_num_steps is None:` around a
        # bare `assert topk is None and draft_tokens is None` names the missing flag.
        around = outer[used + 1 : used + 1 + MAX_CONTEXT]
        context = [_guard_text(test, negated) for test, negated in around]
        context_reads = set().union(*(self.reads(test, scope, mod) for test, _ in around))
        message_reads = set().union(*(self.reads(f.node, scope, mod) for f in message.fields))
        reads = cond_reads | message_reads
        site: dict[str, Any] = {
            "file": mod.rel,
            "function": at.function,
            "line": node.lineno,
            "end_line": node.end_lineno or node.lineno,
            "kind": kind,
            "exception": exception,
            "message": message.text,
            "pattern": message.pattern,
            "literals": message.literals,
            "condition": condition,
            "reads": sorted(reads),
            "condition_reads": sorted(cond_reads),
            "flags": [],
            "condition_flags": [],
            "context": context,
            "context_reads": sorted(context_reads),
            "context_flags": [],
            "startup": mod.rel.startswith(STARTUP_FILES),
        }
        if message.first_line_pattern is not None:
            site["first_line_pattern"] = message.first_line_pattern
        at.sites.append(site)

    def mine(self, files: Sequence[str] = MINED_FILES) -> list[dict[str, Any]]:
        paths = sorted({p for pattern in files for p in self.package.glob(pattern)})
        sites: list[dict[str, Any]] = []
        for path in paths:
            mod = self.module(path)
            if mod is not None:
                sites.extend(self.mine_file(mod))
        sites.sort(key=lambda s: (s["file"], s["line"], s["end_line"], s["kind"]))
        return sites


# -- the release, its flag catalog, the JSON ---------------------------------------------
def build_error_catalog(
    package: Path,
    flag_catalog: dict[str, Any],
    files: Sequence[str] = MINED_FILES,
    miner_class: type[Miner] = Miner,
) -> dict[str, Any]:
    """The error catalog of the release at `package`, flags from its `flag_catalog` (JSON).
    `files` and `miner_class`: what benchmarks/flag_probe.py mines beyond the shipped set."""
    long_of = {}
    for option in flag_catalog["options"]:
        strings = option["option_strings"]
        long_of.setdefault(
            option["dest"], next((s for s in strings if s.startswith("--")), strings[0])
        )
    numbers = {
        o["dest"]
        for o in flag_catalog["options"]
        if o.get("type") == "int" and isinstance(o.get("default"), int) and not o.get("nargs")
    }
    miner = miner_class(package, long_of, numbers)
    for field, dest in miner.aliases.items():
        long_of.setdefault(field, long_of[dest])
    entries = miner.mine(files)
    for entry in entries:
        entry["flags"] = sorted({long_of[r] for r in entry["reads"] if r in long_of})
        for key in ("condition", "context"):
            flags = {long_of[r] for r in entry[f"{key}_reads"] if r in long_of}
            entry[f"{key}_flags"] = sorted(flags)
    return {
        "sglang_version": package_version(package),
        "flag_catalog": flag_catalog.get("sglang_version"),
        "how": HOW,
        "files": list(files),
        "entries": entries,
    }


def dumps(catalog: dict[str, Any]) -> str:
    """Deterministic JSON: sorted keys, one entry per line (reviewable diffs, small files)."""
    head = {k: v for k, v in catalog.items() if k != "entries"}
    lines = [json.dumps(e, sort_keys=True, ensure_ascii=False) for e in catalog["entries"]]
    body = json.dumps(head, sort_keys=True, ensure_ascii=False, indent=1)[:-2]
    return body + ',\n "entries": [\n' + ",\n".join(lines) + "\n ]\n}\n"


def write_error_catalog(
    path: str | os.PathLike[str], package: Path, flag_catalog: dict[str, Any]
) -> int:
    """Write the error catalog; returns how many entries it has."""
    catalog = build_error_catalog(package, flag_catalog)
    write_output(Path(path), dumps(catalog), [])
    return len(catalog["entries"])


MINER = SourceMiner(
    "analyzer.sglang.error_catalog_build",
    "Mine SGLang's raise/assert sites into an error catalog (JSON).",
    "errors-",
    "entries",
    write_error_catalog,
)
write_beside = MINER.write_beside


if __name__ == "__main__":
    raise SystemExit(MINER.main())
