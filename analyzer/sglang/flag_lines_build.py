"""Build SGLang's flag-on lines: messages a release prints only when a flag is set, mined
from its source with `ast` (SGLang is never imported).

Most pastes carry no launch command and no `server_args=ServerArgs(...)` record, yet their
startup lines often tell which settings were on: `DP attention is enabled. The chunked prefill
size is adjusted ...` is logged only inside `if self.enable_dp_attention:`. For each log call
(`logger.info/warning/...`, `print`, `print_info_once`, `warnings.warn`, ...) of `sglang/srt`
the guards that lead to it are read: the enclosing if-tests (their else branches negated), the
early exits before it in each enclosing block (`if not server_args.x: return`). A guard says a
server argument F is truthy, falsy, None, not None, equal to / among constants, or compared
with a number. F is read through a holder of server arguments (as code_paths_build.py reads
them), `self.F` in ServerArgs' own code, or a copy (`self.a = server_args.F`, `a =
server_args.F`). A fact is evidence of a flag when the flag's default cannot satisfy it: a
branch that runs for the default says nothing.

The message becomes a matcher: its literal text with every interpolated value (f-string
field, `%s`, `{}`) a wildcard, cut at its first newline. A message whose literal words are
too few to be distinctive is left out, and so is one that matches another message of the
release (rendered with its own wildcards) printed under other conditions: an entry's flags
are those every message it can match requires. Messages in a branch that also assigns the
field (SGLang choosing the value itself, `Use triton as default attention backend`) say
nothing of the user's choice and are left out.

    .venv/bin/python -m analyzer.sglang.flag_lines_build --python .sglang/venv/bin/python
    .venv/bin/python -m analyzer.sglang.flag_lines_build --package-dir .sglang/releases/0.5.13/sglang
"""

from __future__ import annotations

import ast
import json
import os
import re
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analyzer.core.output import write_output
from analyzer.sglang.code_paths_build import SERVER_ARGS_FILES
from analyzer.sglang.release_source import SourceMiner, package_version
from analyzer.sglang.source_guards import (
    Fact,
    Guards,
    argument_fields,
    assigned_fields,
    direct_copies,
    evidence_test,
    local_copies,
    local_holders,
    resolved_values,
)

HOW = (
    "built by `loganalyze catalog build` (analyzer/sglang/flag_lines_build.py) with ast from "
    "the release's source: messages logged only when a server argument is set"
)
PREFIX, SUFFIX = "flaglines-", ".json"
MINED = "srt/**/*.py"
LOG_METHODS = frozenset(
    {"debug", "info", "warning", "warn", "error", "critical", "exception", "info_once",
     "warning_once", "print_info_once", "print_warning_once"}
)  # fmt: skip
PRINT_CALLS = frozenset(
    {"print", "print_info_once", "print_warning_once", "log_info_on_rank0", "rank0_log"}
)
EXITS = (ast.Return, ast.Raise, ast.Continue, ast.Break)
WILDCARD = None  # a piece of a message that is an interpolated value
# a message is distinctive with this many letters of literal text in its longest piece,
# and this many words in all
MIN_ANCHOR_CHARS = 14
MIN_WORDS = 3
PERCENT_FIELD = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(?:\d+|\*)?(?:\.\d+)?[sdifrxXeEgGc]")
BRACE_FIELD = re.compile(r"\{[^{}]*\}")
WORD = re.compile(r"[A-Za-z]{2,}")
PLACEHOLDER = "\x00"


@dataclass(frozen=True)
class Message:
    """One log call: its pieces (literal strings, WILDCARD) and the facts guarding it."""

    pieces: tuple[str | None, ...]
    facts: frozenset[Fact]
    file: str
    line: int


def _pieces(node: ast.expr) -> list[str | None]:
    """A message expression as literal pieces and wildcards."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        out: list[str | None] = []
        for value in node.values:
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                out.append(value.value)
            else:
                out.append(WILDCARD)
        return out
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _pieces(node.left) + _pieces(node.right)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        if isinstance(node.left, ast.Constant) and isinstance(node.left.value, str):
            return _split(node.left.value, PERCENT_FIELD, "%%", "%")
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        base = node.func.value
        if node.func.attr == "format" and isinstance(base, ast.Constant):
            if isinstance(base.value, str):
                return _split(base.value.replace("{{", "\x01").replace("}}", "\x02"), BRACE_FIELD)
    return [WILDCARD]


def _split(text: str, fields: re.Pattern[str], escaped: str = "", plain: str = "") -> list:
    out: list[str | None] = []
    for at, part in enumerate(fields.split(text)):
        if at:
            out.append(WILDCARD)
        part = part.replace(escaped, plain) if escaped else part
        out.append(part.replace("\x01", "{").replace("\x02", "}"))
    return out


def normalize(pieces: list[str | None]) -> tuple[str | None, ...]:
    """Merge neighbours, cut at the first newline, strip the ends' whitespace."""
    merged: list[str | None] = []
    for piece in pieces:
        if piece is WILDCARD:
            if merged and merged[-1] is WILDCARD:
                continue
            merged.append(WILDCARD)
        elif merged and merged[-1] is not WILDCARD:
            merged[-1] = merged[-1] + piece  # type: ignore[operator]
        else:
            merged.append(piece)
    cut: list[str | None] = []
    for piece in merged:
        if piece is not WILDCARD and "\n" in piece:
            head = piece.split("\n", 1)[0]
            if head.strip() or cut:
                cut.append(head)
                break
            piece = piece.lstrip("\n").split("\n", 1)[0]  # a leading newline: the next line
        cut.append(piece)
    while cut and cut[0] is not WILDCARD and not cut[0].strip():
        cut.pop(0)
    while cut and cut[-1] is not WILDCARD and not cut[-1].strip():
        cut.pop()
    if cut and cut[0] is not WILDCARD:
        cut[0] = cut[0].lstrip()
    if cut and cut[-1] is not WILDCARD:
        cut[-1] = cut[-1].rstrip()
    return tuple(p for p in cut if p != "")


def _message_arg(call: ast.Call) -> ast.expr | None:
    """The message of a log call, if `call` is one."""
    func = call.func
    if isinstance(func, ast.Name) and func.id in PRINT_CALLS:
        args = call.args[1:] if func.id in ("log_info_on_rank0", "rank0_log") else call.args
    elif isinstance(func, ast.Attribute) and func.attr in LOG_METHODS:
        base = func.value
        name = base.id if isinstance(base, ast.Name) else getattr(base, "attr", "")
        if not ("log" in name.lower() or name == "warnings"):
            return None
        args = call.args
    else:
        return None
    return args[0] if args else None


class _Walker:
    """Every log call of one function body with the facts its guards give."""

    def __init__(self, guards: Guards, rel: str) -> None:
        self.guards = guards
        self.rel = rel
        self.found: list[Message] = []

    def block(self, body: list[ast.stmt], facts: tuple[Fact, ...], owned: set[str]) -> None:
        extra: list[Fact] = []
        for stmt in body:
            here = (*facts, *extra)
            self.statement(stmt, here, owned)
            if isinstance(stmt, ast.If) and not stmt.orelse and stmt.body:
                if isinstance(stmt.body[-1], EXITS):
                    extra += self.guards.facts(stmt.test, False)

    def statement(self, stmt: ast.stmt, facts: tuple[Fact, ...], owned: set[str]) -> None:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return  # runs when called: its own guards only (mined on its own)
        self.calls(stmt, facts, owned)
        if isinstance(stmt, ast.If):
            body_facts = tuple(self.guards.facts(stmt.test, True))
            else_facts = tuple(self.guards.facts(stmt.test, False))
            self.block(
                stmt.body, (*facts, *body_facts), owned | assigned_fields(stmt.body, self.guards)
            )
            self.block(
                stmt.orelse,
                (*facts, *else_facts),
                owned | assigned_fields(stmt.orelse, self.guards),
            )
            return
        for name in ("body", "orelse", "finalbody"):
            inner = getattr(stmt, name, None)
            if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                self.block(inner, facts, owned)
        for handler in getattr(stmt, "handlers", []):
            self.block(handler.body, facts, owned)
        for case in getattr(stmt, "cases", []):
            self.block(case.body, facts, owned)

    def calls(self, stmt: ast.stmt, facts: tuple[Fact, ...], owned: set[str]) -> None:
        """The log calls of the statement's own expressions (not of its nested blocks)."""
        for node in _own_expressions(stmt):
            for call in ast.walk(node):
                if not isinstance(call, ast.Call):
                    continue
                message = _message_arg(call)
                if message is None:
                    continue
                kept = frozenset(f for f in facts if f.field not in owned)
                pieces = normalize(_pieces(message))
                self.found.append(Message(pieces, kept, self.rel, call.lineno))


def _own_expressions(stmt: ast.stmt) -> Iterator[ast.AST]:
    """The expressions of a statement outside its nested statement blocks."""
    for name, value in ast.iter_fields(stmt):
        if name in ("body", "orelse", "finalbody", "handlers", "cases"):
            continue
        if isinstance(value, ast.AST):
            yield value
        elif isinstance(value, list):
            yield from (v for v in value if isinstance(v, ast.AST))


def mine_file(
    path: Path, rel: str, dests: frozenset[str], resolved: dict[str, list[Any]] | None = None
) -> list[Message]:
    """Every log call of one source file with its guards' facts; the values the file
    assigns to server arguments are added to `resolved`."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (SyntaxError, UnicodeDecodeError, ValueError):
        return []
    guards = Guards(dests, rel.startswith(SERVER_ARGS_FILES))
    walker = _Walker(guards, rel)
    if resolved is not None:
        for field, values in resolved_values(tree, guards).items():
            resolved.setdefault(field, []).extend(values)

    def visit(function: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        guards.holders = local_holders(function)
        guards.locals = local_copies(function, guards)
        walker.block(function.body, (), set())
        for node in ast.walk(function):
            if node is not function and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                guards.holders = local_holders(node)
                guards.locals = local_copies(node, guards)
                walker.block(node.body, (), set())

    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            guards.copies = direct_copies(node, guards)
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    visit(item)
            guards.copies = {}
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            visit(node)
    return walker.found


def is_distinctive(pieces: tuple[str | None, ...]) -> bool:
    literals = [p for p in pieces if p is not WILDCARD]
    if not literals:
        return False
    anchor = max(literals, key=len)
    words = sum(len(WORD.findall(p)) for p in literals)
    return len(anchor.strip()) >= MIN_ANCHOR_CHARS and words >= MIN_WORDS


def pattern_of(pieces: Sequence[str | None]) -> str:
    """The matcher's regular expression: literal pieces, wildcards between."""
    return "".join(r"[^\n]*?" if p is WILDCARD else re.escape(p) for p in pieces)


def _rendered(pieces: Sequence[str | None]) -> str:
    return "".join(PLACEHOLDER if p is WILDCARD else p for p in pieces)


def build_flag_lines(package: Path, flag_catalog: dict[str, Any]) -> dict[str, Any]:
    """The flag-on lines of the release at `package`, flags from its `flag_catalog`."""
    long_of, default_of = argument_fields(flag_catalog)
    dests = frozenset(long_of)
    messages: list[Message] = []
    resolved: dict[str, list[Any]] = {}
    for path in sorted(package.glob(MINED)):
        rel = path.relative_to(package).as_posix()
        messages += mine_file(path, rel, dests, resolved)

    is_evidence = evidence_test(default_of, resolved)

    def flags_of(message: Message) -> frozenset[str]:
        return frozenset(long_of[f.field] for f in message.facts if is_evidence(f))

    rendered = [_rendered(m.pieces) for m in messages]
    by_pattern: dict[tuple[str | None, ...], list[Message]] = {}
    for message in messages:
        if is_distinctive(message.pieces):
            by_pattern.setdefault(message.pieces, []).append(message)
    entries = []
    for pieces, sites in sorted(by_pattern.items(), key=lambda item: pattern_of(item[0])):
        flags = frozenset.intersection(*(flags_of(m) for m in sites))
        if not flags:
            continue
        regex = re.compile(pattern_of(pieces))
        anchor = max((p for p in pieces if p is not WILDCARD), key=len)
        for message, text in zip(messages, rendered, strict=True):
            if message.pieces != pieces and anchor in text and regex.search(text):
                flags &= flags_of(message)
        if flags:
            site = sites[0]
            entries.append(
                {
                    "flags": sorted(flags),
                    "pieces": [p if p is not WILDCARD else 0 for p in pieces],
                    "site": f"{site.file}:{site.line}",
                }
            )
    return {
        "sglang_version": package_version(package),
        "flag_catalog": flag_catalog.get("sglang_version"),
        "how": HOW,
        "entries": entries,
    }


def dumps(data: dict[str, Any]) -> str:
    """Deterministic JSON, one entry per line."""
    head = {k: v for k, v in data.items() if k != "entries"}
    lines = [f" {json.dumps(e, sort_keys=True, ensure_ascii=False)}" for e in data["entries"]]
    body = json.dumps(head, sort_keys=True, ensure_ascii=False, indent=1)[:-2]
    return body + ',\n "entries": [\n' + ",\n".join(lines) + "\n ]\n}\n"


def write_flag_lines(
    path: str | os.PathLike[str], package: Path, flag_catalog: dict[str, Any]
) -> int:
    """Write the flag-on lines; returns how many entries."""
    data = build_flag_lines(package, flag_catalog)
    write_output(Path(path), dumps(data), [])
    return len(data["entries"])


MINER = SourceMiner(
    "analyzer.sglang.flag_lines_build",
    "Mine the messages SGLang logs only when a flag is set (JSON).",
    PREFIX,
    "flag-on lines",
    write_flag_lines,
)
write_beside = MINER.write_beside


if __name__ == "__main__":
    raise SystemExit(MINER.main())
