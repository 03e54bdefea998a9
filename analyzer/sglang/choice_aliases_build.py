"""Mine the library and kernel names SGLang's choices stand for, from its source.

A choice such as `--attention-backend fa3` names a backend SGLang builds from a library's
class (`create_flashattention_v3_backend` -> `FlashAttentionBackend`); users often write
the library's name instead (`flash-attention-3`, `TorchNativeAttention`, `float8_e4m3fn`).
Three shapes of SGLang's code tie a choice string to such names, read with `ast` (SGLang is
never imported):

- a registration: `@register_attention_backend("fa3")` on `def create_flashattention_v3_backend`
  (the function's name and the backend classes its body builds);
- a dispatch branch: `if name == "llguidance": ... GuidanceBackend(...)` or
  `elif kv_cache_dtype == "fp8_e4m3": kv_cache_dtype = torch.float8_e4m3fn`;
- a table from torch dtypes to choice strings: `{torch.float8_e4m3fn: "fp8_e4m3", ...}`.

    .venv/bin/python -m analyzer.sglang.choice_aliases_build \\
        .sglang/venv/lib/python3.11/site-packages/sglang --version 0.5.23 -o analyzer/catalogs/choice_aliases.json

The runtime side (analyzer/sglang/choice_aliases.py) only maps a value to a choice the
flag really has, and only when the name points at one choice.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from pathlib import Path

CLASS_SUFFIXES = ("AttnBackend", "Backend", "Sampler")
FUNCTION_WORDS = re.compile(r"^(?:create|init|make|get)_|_(?:backend|factory|init)$")
CHOICE = re.compile(r"^[a-z][a-z0-9_]*$")


def mine(package: Path) -> dict[str, list[str]]:
    """choice -> the names it stands for (sorted), over every module of `package`/srt."""
    found: dict[str, set[str]] = {}
    tables: dict[str, set[str]] = {}
    for path in sorted((package / "srt").rglob("*.py")):
        try:
            tree = ast.parse(path.read_text("utf-8"))
        except (SyntaxError, UnicodeDecodeError, OSError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                for name in _registered(node):
                    found.setdefault(name, set()).update(_function_names(node))
            elif isinstance(node, ast.If):
                for name in _compared(node.test):
                    found.setdefault(name, set()).update(_built(node.body))
            elif isinstance(node, ast.Dict):
                for key, value in zip(node.keys, node.values, strict=True):
                    torch_name = _torch_attribute(key)
                    if torch_name and isinstance(value, ast.Constant):
                        if isinstance(value.value, str) and CHOICE.match(value.value):
                            tables.setdefault(value.value, set()).add(torch_name)
    for name, aliases in tables.items():
        found.setdefault(name, set()).update(aliases)
    # a torch dtype a table gives to one choice is that choice's only (mxfp8 is stored as
    # float8_e4m3fn too, but the table names fp8_e4m3)
    claimed = {alias: name for name, aliases in tables.items() for alias in aliases}
    return {
        name: sorted(a for a in aliases if a != name and claimed.get(a, name) == name)
        for name, aliases in sorted(found.items())
        if any(a != name and claimed.get(a, name) == name for a in aliases)
    }


def _registered(node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    names = []
    for decorator in node.decorator_list:
        if not isinstance(decorator, ast.Call) or not decorator.args:
            continue
        called = _name(decorator.func)
        first = decorator.args[0]
        if called and called.startswith("register") and isinstance(first, ast.Constant):
            if isinstance(first.value, str) and CHOICE.match(first.value):
                names.append(first.value)
    return names


def _function_names(node: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    names = {FUNCTION_WORDS.sub("", FUNCTION_WORDS.sub("", node.name))}
    return names | _built(node.body)


def _compared(test: ast.expr) -> list[str]:
    """The strings a branch's test compares a value with: `x == "a"`, `x in ("a", "b")`."""
    if not isinstance(test, ast.Compare) or len(test.ops) != 1:
        return []
    op, right = test.ops[0], test.comparators[0]
    if isinstance(op, ast.Eq) and isinstance(right, ast.Constant):
        values = [right.value]
    elif isinstance(op, ast.In) and isinstance(right, ast.Tuple | ast.Set | ast.List):
        values = [e.value for e in right.elts if isinstance(e, ast.Constant)]
    else:
        return []
    return [v for v in values if isinstance(v, str) and CHOICE.match(v)]


def _built(body: list[ast.stmt]) -> set[str]:
    """Backend classes a branch imports or builds, and torch dtypes it assigns, at its top
    level (deeper code is another decision)."""
    names: set[str] = set()
    for statement in body:
        if isinstance(statement, ast.ImportFrom):
            names.update(_class_name(a.name) for a in statement.names if _is_backend(a.name))
            continue
        if not isinstance(statement, ast.Assign | ast.Return | ast.Expr):
            continue
        for node in ast.walk(statement):
            torch_name = _torch_attribute(node)
            if torch_name:
                names.add(torch_name)
            elif isinstance(node, ast.Call):
                called = _name(node.func)
                if called and _is_backend(called):
                    names.add(_class_name(called))
    return {n for n in names if n}


def _is_backend(name: str) -> bool:
    return name[:1].isupper() and name.endswith(CLASS_SUFFIXES)


def _class_name(name: str) -> str:
    for suffix in CLASS_SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def _torch_attribute(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        if node.value.id == "torch" and re.match(r"^(?:b?float|u?int)\d", node.attr):
            return node.attr
    return None


def _name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("package", type=Path, help="the sglang package folder")
    parser.add_argument("-o", "--output", type=Path, required=True)
    parser.add_argument("--version", required=True, help="the SGLang release it is")
    args = parser.parse_args(argv)
    data = {
        "sglang_version": args.version,
        "how": "built by analyzer/sglang/choice_aliases_build.py from sglang/srt with ast",
        "aliases": mine(args.package),
    }
    args.output.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
