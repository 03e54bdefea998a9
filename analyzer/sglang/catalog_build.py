"""Build the flag catalog from a real SGLang install.

The analyzer never imports SGLang at run time: it reads a JSON catalog of every
`launch_server` option (names, aliases, types, choices, defaults). This module
writes that catalog by asking SGLang itself: it builds an `argparse` parser the
way `sglang.srt.server_args.prepare_server_args` does and lets
`ServerArgs.add_cli_args` fill it, so aliases, dynamic choices and deprecated
spellings come out exactly as the installed version registers them.

SGLang is imported only inside `build_catalog`, so `analyzer` imports without it.
Run it with the Python of an environment that has SGLang, e.g.

    .sglang/venv/bin/python -m analyzer.sglang.catalog_build -o analyzer/catalogs/sglang-0.5.23.json
    PYTHONPATH=.sglang/releases/0.5.13:. .sglang/venv/bin/python -m analyzer.sglang.catalog_build \
        -o analyzer/catalogs/sglang-0.5.13.json       # an older release (install-sglang.sh)
"""

from __future__ import annotations

import argparse
import ast
import datetime
import enum
import functools
import json
import math
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from analyzer.core.output import OutputError, write_output

HOW = (
    "built by `loganalyze catalog build` from "
    "sglang.srt.server_args.ServerArgs.add_cli_args on a parser made like "
    "prepare_server_args makes it"
)

# `prepare_server_args` in 0.5.23: `argparse.ArgumentParser(prog="sglang serve")`,
# so allow_abbrev keeps argparse's default (True) and prefixes get expanded.
PROG = "sglang serve"

# The files whose frames show up in startup tracebacks. Their function line ranges are
# each release's fingerprint: a frame `server_args.py, line 3021, in __post_init__`
# names the releases where __post_init__ spans line 3021 (analyzer/sglang/releases.py).
FINGERPRINT_FILES = (
    "launch_server.py",
    "srt/server_args.py",
    "srt/entrypoints/engine.py",
    "srt/entrypoints/http_server.py",
    "srt/managers/scheduler.py",
    "srt/managers/tp_worker.py",
    "srt/model_executor/model_runner.py",
    "srt/model_loader/loader.py",
    "srt/speculative/eagle_worker.py",
    "srt/managers/tokenizer_manager.py",
    "srt/speculative/spec_info.py",
    "srt/configs/model_config.py",
    "srt/utils/common.py",
    "srt/arg_groups/*.py",
)

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
# A sentence ends at `.`/`!`/`?` before whitespace and a non-lowercase character.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[^a-z0-9\s])")


def make_parser() -> argparse.ArgumentParser:
    """The parser `prepare_server_args` builds, options registered by SGLang itself.

    `load_plugins()` is deliberately not called (launch_server calls it first):
    the catalog describes stock SGLang, not whatever plugins this machine has.
    """
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser(prog=PROG)
    ServerArgs.add_cli_args(parser)
    return parser


def build_catalog() -> dict[str, Any]:
    """Every option of the installed SGLang's server parser, as plain JSON data."""
    import sglang

    parser = make_parser()
    options = [_describe_action(parser, action) for action in parser._actions]
    options.sort(
        key=lambda option: (
            option["option_strings"][0] if option["option_strings"] else option["dest"]
        )
    )
    return {
        "sglang_version": getattr(sglang, "__version__", None),
        "built": datetime.date.today().isoformat(),
        "how": HOW,
        "prog": parser.prog,
        "allow_abbrev": parser.allow_abbrev,
        "options": options,
        "source_lines": source_lines(Path(sglang.__file__).parent),
    }


def source_lines(package: Path) -> dict[str, dict[str, str]]:
    """For each fingerprint file present: function name -> its line ranges, "10-52 90-97"
    (one string, so the indented catalog keeps one line per function)."""
    lines: dict[str, dict[str, str]] = {}
    paths = sorted({path for pattern in FINGERPRINT_FILES for path in package.glob(pattern)})
    for path in paths:
        name = path.relative_to(package).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        functions: dict[str, list[tuple[int, int]]] = {}
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                span = (node.lineno, node.end_lineno or node.lineno)
                functions.setdefault(node.name, []).append(span)
        lines[name] = {
            key: " ".join(f"{a}-{b}" for a, b in sorted(functions[key]))
            for key in sorted(functions)
        }
    return lines


def write_catalog(path: str) -> None:
    """Build the catalog and write it as indented JSON (keys in schema order, options sorted)."""
    catalog = build_catalog()
    write_output(Path(path), json.dumps(catalog, indent=1, ensure_ascii=False) + "\n", [])


def main(argv: Sequence[str] | None = None) -> int:
    """`loganalyze catalog build -o FILE` (also `python -m analyzer.sglang.catalog_build`)."""
    cli = argparse.ArgumentParser(
        prog="loganalyze catalog build",
        description="Write the SGLang flag catalog from the installed SGLang.",
    )
    cli.add_argument("-o", "--output", required=True, help="where to write the JSON catalog")
    args = cli.parse_args(list(argv) if argv is not None else None)
    try:
        write_catalog(args.output)
    except ImportError as exc:
        print(f"loganalyze catalog build: SGLang is not importable here: {exc}", file=sys.stderr)
        return 2
    except OutputError as exc:
        print(f"loganalyze catalog build: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {args.output}")
    return 0


def _describe_action(parser: argparse.ArgumentParser, action: argparse.Action) -> dict[str, Any]:
    """One catalog entry; the keys are fixed so every entry has the same shape."""
    choices = action.choices
    return {
        "option_strings": list(action.option_strings),
        "dest": action.dest,
        "type": _callable_name(action.type),
        "choices": None if choices is None else _choice_list(choices),
        "default": _json_safe(action.default),
        "nargs": _json_safe(action.nargs),
        "required": bool(action.required),
        "action": _action_name(parser, action),
        "help": _first_sentence(action.help),
    }


def _action_name(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """argparse's registry name (`store_true`, ...) or the custom class's name."""
    registry = parser._registries.get("action", {})
    for name, cls in registry.items():
        if isinstance(name, str) and cls is type(action):
            return name
    return type(action).__name__


def _callable_name(func: Any) -> str | None:
    """`int`, `float`, `str` or the function's name; partials name their function."""
    if func is None:
        return None
    if isinstance(func, functools.partial):
        return _callable_name(func.func)
    name = getattr(func, "__name__", None)
    if isinstance(name, str):
        return name
    return type(func).__name__


def _choice_list(choices: Any) -> list[Any]:
    """Choices as a JSON list; unordered containers (sets) sorted so output is stable."""
    values = [_json_safe(choice) for choice in choices]
    if isinstance(choices, (set, frozenset)):
        values.sort(key=lambda value: json.dumps(value, sort_keys=True))
    return values


def _json_safe(value: Any) -> Any:
    """The value if JSON can carry it exactly, else a repr string without addresses."""
    if isinstance(value, enum.Enum):
        return _stable_repr(value)
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else _stable_repr(value)
    if isinstance(value, (list, tuple)):
        return [_json_safe(item) for item in value]
    if isinstance(value, dict) and all(isinstance(key, str) for key in value):
        return {key: _json_safe(item) for key, item in value.items()}
    if isinstance(value, (set, frozenset)):
        return sorted((_json_safe(item) for item in value), key=json.dumps)
    return _stable_repr(value)


def _stable_repr(value: Any) -> str:
    """repr with memory addresses removed, so rebuilding gives the same text."""
    return _ADDRESS.sub("", repr(value))


def _first_sentence(text: str | None) -> str | None:
    """The first sentence of a help text, whitespace collapsed; None if hidden."""
    if text is None or text == argparse.SUPPRESS:
        return None
    flat = " ".join(text.split())
    return _SENTENCE_END.split(flat, maxsplit=1)[0]


if __name__ == "__main__":
    raise SystemExit(main())
