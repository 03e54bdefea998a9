"""Mine SGLang's deprecation messages: which option each retired flag names as its successor.

The flag catalogs keep the first sentence of each help text, which often stops before the
successor ("Note: --hybrid-kvcache-ratio is deprecated now." / "Please use
--swa-full-tokens-ratio instead."). This reads each release's `srt/server_args.py` and
`srt/arg_groups/*.py` with `ast` (SGLang is never imported):

- `add_argument("--old", ..., help="... use --new instead ...")`, the whole help text;
- `add_argument("--old", action=Deprecated...Action, new_flag="--new=value")`;
- a warning or error text "--old is deprecated, use --new value instead".

    .venv/bin/python -m analyzer.sglang.flag_successors_build \\
        0.5.23=.sglang/venv/lib/python3.11/site-packages/sglang \\
        0.5.19=.sglang/releases/0.5.19/sglang ... -o analyzer/catalogs/flag_successors.json

analyzer/sglang/flag_history.py reads the result (and the catalogs' help sentences).
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from pathlib import Path

SOURCES = ("srt/server_args.py", "srt/arg_groups/*.py")
# "--old is deprecated[ now][;,.] [please ]use --new[ value] instead"
WARNED = re.compile(
    r"(?P<old>--[a-z0-9]+(?:-[a-z0-9]+)*)(?:=\S+)? is deprecated\b(?P<rest>.*)", re.I
)


def mine(package: Path) -> dict[str, str]:
    """old flag -> the text that names its successor (help, new_flag or warning)."""
    texts: dict[str, str] = {}
    for pattern in SOURCES:
        for path in sorted(package.glob(pattern)):
            try:
                tree = ast.parse(path.read_text("utf-8"))
            except (SyntaxError, UnicodeDecodeError, OSError):
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.Call):
                    _read_call(node, texts)
    return dict(sorted(texts.items()))


def _read_call(node: ast.Call, texts: dict[str, str]) -> None:
    if isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
        flags = [a.value for a in node.args if _is_flag(a)]
        keywords = {k.arg: k.value for k in node.keywords if k.arg}
        new_flag = _text(keywords.get("new_flag"))
        help_text = _text(keywords.get("help")) or ""
        said = f"Deprecated. Use {new_flag} instead." if new_flag else help_text
        if flags and "deprecat" in said.lower():
            for flag in flags:
                if flag.startswith("--"):
                    texts.setdefault(flag, " ".join(said.split()))
        return
    for argument in node.args:
        text = _text(argument)
        found = WARNED.search(text or "")
        if found and "use" in found["rest"].lower():
            texts.setdefault(found["old"], " ".join(f"Deprecated: {found['rest']}".split()))


def _is_flag(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value[:1] == "-"


def _text(node: ast.expr | None) -> str | None:
    """A string literal, implicit concatenation or f-string's literal parts."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value for v in node.values if isinstance(v, ast.Constant))
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _text(node.left), _text(node.right)
        return (left or "") + (right or "") if left or right else None
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("releases", nargs="+", help="VERSION=path/to/sglang, one per release")
    parser.add_argument("-o", "--output", type=Path, required=True)
    args = parser.parse_args(argv)
    releases = {}
    for item in args.releases:
        version, _, folder = item.partition("=")
        releases[version] = mine(Path(folder))
    data = {
        "how": "built by analyzer/sglang/flag_successors_build.py from each release's "
        "srt/server_args.py and srt/arg_groups with ast",
        "releases": releases,
    }
    args.output.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
