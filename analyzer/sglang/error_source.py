"""Reading SGLang's source for the error catalog: message templates and ast helpers.

An error message as SGLang's source writes it is turned into a matcher.

`f"--tp-size {self.tp_size} must be divisible by {n}"`, `"... %d ..." % x`,
`"...{}...".format(x)` and `"a" + str(b)` all become one template: literal parts, and
fields for what is only known at run time. The template gives the message text shown in
the catalog (`{self.tp_size}`; literal braces doubled, as in a format string), a regex
source matching the rendered message (fields typed as numbers where the source says so),
and the literal fragments an Aho-Corasick prefilter looks for. Used by the error catalog
builder only; the analyzer reads the resulting JSON.
"""

from __future__ import annotations

import ast
import re
import string
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

NUMBER = r"-?\d+(?:\.\d+)?"
ANY = r".+?"
MIN_LITERAL = 4
MAX_LITERALS = 3
_PERCENT = re.compile(r"%(?:\((\w+)\))?[-+ #0]*(?:\d+|\*)?(?:\.\d+)?([diouxXeEfFgGcrsa%])")
_NUMERIC_SPEC = re.compile(r"[dfeEgGn%]$")
LOG_METHODS = frozenset({"error", "critical", "fatal", "exception"})
EXIT_CALLS = frozenset({"exit", "_exit", "quit", "kill_process_tree"})
_NUMERIC_CALLS = frozenset({"len", "int", "float", "round", "sum", "min", "max", "abs"})


@dataclass(frozen=True)
class Field:
    """A run-time value in the message: the expression, and whether it renders a number."""

    node: ast.expr
    number: bool = False

    @property
    def src(self) -> str:
        return ast.unparse(self.node)


Part = str | Field


@dataclass(frozen=True)
class Template:
    """Literal text and fields, in order."""

    parts: tuple[Part, ...]

    @staticmethod
    def empty() -> Template:
        return Template(())

    @property
    def fields(self) -> list[Field]:
        return [p for p in self.parts if isinstance(p, Field)]

    @property
    def text(self) -> str:
        return "".join(
            p.replace("{", "{{").replace("}", "}}") if isinstance(p, str) else f"{{{p.src}}}"
            for p in self.parts
        )

    @property
    def pattern(self) -> str:
        return _pattern(self.parts)

    @property
    def first_line_pattern(self) -> str | None:
        """For a multi-line message: the pattern of its first line (a log shows one line)."""
        head = self._first_line()
        return None if head is None else _pattern(head)

    @property
    def literals(self) -> list[str]:
        """The longest literal fragments, from the first line: each occurs in the message."""
        parts = self._first_line() or self.parts
        fragments = {
            piece.strip()
            for p in parts
            if isinstance(p, str)
            for piece in p.split("\n")
            if len(piece.strip()) >= MIN_LITERAL
        }
        return sorted(fragments, key=lambda f: (-len(f), f))[:MAX_LITERALS]

    def _first_line(self) -> tuple[Part, ...] | None:
        for i, part in enumerate(self.parts):
            if isinstance(part, str) and "\n" in part:
                head = part.split("\n", 1)[0]
                return (*self.parts[:i], *([head] if head else []))
        return None


_SPECIAL = re.compile(r"([.^$*+?{}\[\]\\|()])")


def _escape(text: str) -> str:
    """re.escape without escaping spaces, dashes and quotes: shorter, as exact."""
    return _SPECIAL.sub(r"\\\1", text).replace("\n", "\\n").replace("\t", "\\t")


def _pattern(parts: Sequence[Part]) -> str:
    out = []
    for part in parts:
        if isinstance(part, str):
            out.append(_escape(part))
        else:
            wildcard = NUMBER if part.number else ANY
            if not (out and out[-1] == ANY and wildcard == ANY):
                out.append(wildcard)
    return "".join(out)


def template_of(
    node: ast.expr,
    locals_src: Mapping[str, ast.expr],
    extra: Sequence[ast.expr] = (),
    numbers: frozenset[str] = frozenset(),
    module: str = "",
) -> Template:
    """The template of a message expression; `extra`: logging's %-format arguments;
    `numbers`: names known to hold an int (ServerArgs int fields with a default);
    `module`: the dotted name of the raising module, which a bare `__name__` holds."""
    parts = _parts(node, locals_src, 0, module)
    parts = [Field(p.node, True) if _named(p, numbers) else p for p in parts]
    if extra and len(parts) == 1 and isinstance(parts[0], str):
        parts = _percent(parts[0], list(extra))
    return Template(tuple(_merge(parts)))


def _parts(
    node: ast.expr, locals_src: Mapping[str, ast.expr], depth: int, module: str = ""
) -> list[Part]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        out: list[Part] = []
        for value in node.values:
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                out.append(value.value)
            elif (
                module
                and isinstance(value, ast.FormattedValue)
                and isinstance(value.value, ast.Name)
                and value.value.id == "__name__"
            ):
                # `module {__name__!r} has no attribute ...` names this module, not any
                out.append(repr(module) if value.conversion == ord("r") else module)
            elif isinstance(value, ast.FormattedValue):
                spec = "".join(
                    v.value
                    for v in getattr(value.format_spec, "values", [])
                    if isinstance(v, ast.Constant)
                )
                numeric = bool(_NUMERIC_SPEC.search(spec))
                out.append(Field(value.value, numeric or _numeric(value.value)))
        return out
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left = _parts(node.left, locals_src, depth, module)
        right = _parts(node.right, locals_src, depth, module)
        return [*left, *right]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        if isinstance(node.left, ast.Constant) and isinstance(node.left.value, str):
            args = node.right.elts if isinstance(node.right, ast.Tuple) else [node.right]
            return _percent(node.left.value, list(args))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        base = node.func.value
        if (
            node.func.attr == "format"
            and isinstance(base, ast.Constant)
            and isinstance(base.value, str)
        ):
            return _format(base.value, node)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("str", "repr")
    ):
        if node.args and not isinstance(node.args[0], ast.Starred):
            return [Field(node.args[0], _numeric(node.args[0]))]
    if isinstance(node, ast.Name) and node.id in locals_src and depth < 2:
        return _parts(locals_src[node.id], {}, depth + 1, module)
    return [Field(node, _numeric(node))]


def _named(part: Part, names: frozenset[str]) -> bool:
    if not isinstance(part, Field) or part.number:
        return False
    node = part.node
    name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", None)
    return name in names


def _numeric(node: ast.expr) -> bool:
    """A value that renders as a number: len(...), int(...), arithmetic, a number literal."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return (
            node.func.id in _NUMERIC_CALLS
            and node.func.id not in ("min", "max")
            or (node.func.id in ("min", "max") and all(_numeric(a) for a in node.args))
        )
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.FloorDiv, ast.Sub, ast.Mult)):
        return not any(
            isinstance(s, ast.Constant) and isinstance(s.value, str)
            for s in (node.left, node.right)
        )
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (int, float)) and not isinstance(node.value, bool)
    return False


def _percent(text: str, args: list[ast.expr]) -> list[Part]:
    out: list[Part] = []
    at = 0
    used = 0
    for match in _PERCENT.finditer(text):
        out.append(text[at : match.start()])
        at = match.end()
        if match.group(2) == "%":
            out.append("%")
            continue
        arg = args[used] if used < len(args) else ast.Name(id="_", ctx=ast.Load())
        used += 1
        out.append(Field(arg, match.group(2) in "diouxXeEfFgG" or _numeric(arg)))
    out.append(text[at:])
    return out


def _format(text: str, call: ast.Call) -> list[Part]:
    keywords = {kw.arg: kw.value for kw in call.keywords if kw.arg}
    out: list[Part] = []
    auto = 0
    try:
        parsed = list(string.Formatter().parse(text))
    except ValueError:
        return [text]
    for literal, name, spec, _conversion in parsed:
        out.append(literal)
        if name is None:
            continue
        if name == "":
            name = str(auto)
            auto += 1
        key = name.split(".", 1)[0].split("[", 1)[0]
        if key.isdigit() and int(key) < len(call.args):
            arg: ast.expr = call.args[int(key)]
        elif key in keywords:
            arg = keywords[key]
        else:
            arg = ast.Name(id=key or "_", ctx=ast.Load())
        out.append(Field(arg, bool(_NUMERIC_SPEC.search(spec or "")) or _numeric(arg)))
    return out


def _merge(parts: list[Part]) -> list[Part]:
    merged: list[Part] = []
    for part in parts:
        if isinstance(part, str):
            if not part:
                continue
            if merged and isinstance(merged[-1], str):
                merged[-1] += part
                continue
        merged.append(part)
    return merged


# -- walking function bodies -------------------------------------------------------------
def is_self(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id == "self"


def target_names(node: ast.AST) -> list[str]:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]  # type: ignore[attr-defined]
    names = []
    for target in targets:
        for sub in ast.walk(target):
            if isinstance(sub, ast.Name):
                names.append(sub.id)
    return names


def walk_body(func: ast.AST) -> Iterable[ast.AST]:
    """Every node of a function body, not descending into nested functions or classes."""
    stack = list(reversed(func.body))  # type: ignore[attr-defined]
    while stack:
        node = stack.pop()
        yield node
        for child in reversed(list(ast.iter_child_nodes(node))):
            if not isinstance(
                child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
            ):
                stack.append(child)


def exprs(func: ast.AST) -> list[ast.expr]:
    return [n for n in walk_body(func) if isinstance(n, ast.expr)]


def child_blocks(node: ast.stmt) -> list[list[ast.stmt]]:
    blocks = [
        getattr(node, name) for name in ("body", "orelse", "finalbody") if hasattr(node, name)
    ]
    blocks += [h.body for h in getattr(node, "handlers", [])]
    blocks += [c.body for c in getattr(node, "cases", [])]
    return [b for b in blocks if isinstance(b, list)]


def is_log_error(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in LOG_METHODS
        and isinstance(node.func.value, ast.Name)
        and "log" in node.func.value.id.lower()
    )


def exits(following: Sequence[ast.stmt]) -> bool:
    for node in following:
        if (
            isinstance(node, ast.Raise)
            and node.exc is not None
            and "SystemExit" in ast.unparse(node.exc)
        ):
            return True
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            func = node.value.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if name in EXIT_CALLS:
                return True
    return False
